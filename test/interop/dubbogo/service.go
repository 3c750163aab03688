package dubbogo

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"

	"dubbo.apache.org/dubbo-go/v3/common/constant"
)

// Interface is the Java interface name the provider exports.
const Interface = "org.weft.bench.EchoService"

// UserClass is the Java class of User on the wire.
const UserClass = "org.weft.bench.User"

// User is the POJO returned by getUser. On the wire it is the hessian2 object
// org.weft.bench.User with the fields id (long), name (String), tags (a typed
// list "[string") and score (double), in that order.
type User struct {
	ID    int64    `hessian:"id"`
	Name  string   `hessian:"name"`
	Tags  []string `hessian:"tags"`
	Score float64  `hessian:"score"`
}

// JavaClassName makes User a hessian POJO.
func (User) JavaClassName() string { return UserClass }

// Counts of provider method executions in this process (a process has at most
// one provider). They count calls that reached the method, after dubbo-go's
// decoding and filters. Use ResetCalls between tests.
var (
	EchoCalls    atomic.Int64
	GetUserCalls atomic.Int64
	FailCalls    atomic.Int64
)

// ResetCalls zeroes the call counters.
func ResetCalls() {
	EchoCalls.Store(0)
	GetUserCalls.Store(0)
	FailCalls.Store(0)
}

// Request and response attachment keys used by echo.
const (
	ReqAttachment  = "x-req"
	RespAttachment = "x-resp"
)

// EchoService is the provider implementation. dubbo-go finds its methods by
// reflection and also serves them under lower-case first letters (echo,
// getUser, fail), the names Java callers use.
type EchoService struct{}

// Reference names the service for dubbo-go (used as its service id).
func (*EchoService) Reference() string { return Interface }

// Echo returns s. If the request carries the attachment "x-req", it sets the
// response attachment "x-resp" to "resp-"+value.
func (*EchoService) Echo(ctx context.Context, s string) (string, error) {
	EchoCalls.Add(1)
	if m, ok := ctx.Value(constant.AttachmentKey).(map[string]any); ok {
		if v, ok := m[ReqAttachment].(string); ok {
			// m is also the result's attachment map (see the package doc).
			m[RespAttachment] = "resp-" + v
		}
	}
	return s, nil
}

// GetUser returns User{id, "user-<id>", [a b c], id*1.5}.
func (*EchoService) GetUser(_ context.Context, id int64) (*User, error) {
	GetUserCalls.Add(1)
	return NewUser(id), nil
}

// EchoUser returns u with "!" added to its name: a method with a POJO
// argument, which a generic caller passes as a map with "class" (dubbo-go's
// generic filter realizes it into a User).
func (*EchoService) EchoUser(_ context.Context, u *User) (*User, error) {
	if u == nil {
		return nil, errors.New("echoUser: null user")
	}
	out := *u
	out.Name += "!"
	return &out, nil
}

// Fail always returns an error whose message contains s. dubbo-go sends a
// plain Go error as a hessian2 java.lang.Throwable whose detailMessage is
// err.Error().
func (*EchoService) Fail(_ context.Context, s string) error {
	FailCalls.Add(1)
	return errors.New("fail: " + s)
}

// NewUser is what getUser(id) returns.
func NewUser(id int64) *User {
	return &User{
		ID:    id,
		Name:  "user-" + strconv.FormatInt(id, 10),
		Tags:  []string{"a", "b", "c"},
		Score: float64(id) * 1.5,
	}
}
