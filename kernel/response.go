package kernel

import (
	"fmt"
	"strings"

	"github.com/weftrpc/weft/kernel/view"
)

// Response statuses, Dubbo's numbers (Java's Response.OK,
// Response.CLIENT_TIMEOUT, ...): what a Dubbo response's header carries,
// and what weft's exchange layer answers with for every protocol. They sit
// beside the codes (errors.go) they convert to and from.
const (
	ResponseOK                        byte = 20
	ResponseClientTimeout             byte = 30
	ResponseServerTimeout             byte = 31
	ResponseChannelInactive           byte = 35
	ResponseBadRequest                byte = 40
	ResponseBadResponse               byte = 50
	ResponseServiceNotFound           byte = 60
	ResponseServiceError              byte = 70
	ResponseServerError               byte = 80
	ResponseClientError               byte = 90
	ResponseServerThreadpoolExhausted byte = 100
)

// maxResponseText bounds an error text taken from a response: it may
// quote hostile input.
const maxResponseText = 4 << 10

// ResponseError converts a non-OK status into an Error. The status gives
// the code; a text written by WireText (a weft provider) gives the message
// without a second prefix and, for the generic statuses 70/90, the code the
// status cannot carry (forbidden, method not found, ...).
func ResponseError(status byte, msg string) error {
	code := CodeUnknown
	msg = view.Cut(msg, maxResponseText)
	wireCode, text, parsed := ParseText(msg)
	if parsed {
		msg = text
	} else {
		// weft's own texts without a code ("weft: dubbo frame ...") get
		// theirs from the status: one prefix.
		msg = strings.TrimPrefix(msg, "weft: ")
	}
	e := &Error{Msg: msg}
	switch status {
	case ResponseClientTimeout:
		code = CodeTimeout
	case ResponseServerTimeout:
		code, e.ServerSide = CodeTimeout, true
	case ResponseChannelInactive:
		code = CodeNetwork
	case ResponseBadRequest, ResponseBadResponse:
		code = CodeSerialization
	case ResponseServiceNotFound:
		code = CodeServiceNotFound
	case ResponseServerThreadpoolExhausted:
		code = CodeLimitExceeded
	case ResponseServerError:
		code = CodeShuttingDown
		if parsed {
			code = wireCode
		}
	case ResponseServiceError, ResponseClientError:
		if parsed {
			code = wireCode
		}
	}
	e.Code = code
	if e.Msg == "" {
		e.Msg = fmt.Sprintf("status %d", status)
	}
	return e
}
