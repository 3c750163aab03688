package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

func TestIsBizAndCodeOf(t *testing.T) {
	plain := errors.New("plain")
	biz := kernel.BizError(plain)
	tests := []struct {
		name    string
		err     error
		wantBiz bool
		code    kernel.Code
	}{
		{"nil", nil, false, kernel.CodeUnknown},
		{"plain", plain, false, kernel.CodeUnknown},
		{"io.EOF", io.EOF, false, kernel.CodeUnknown},
		{"BizError", biz, true, kernel.CodeBiz},
		{"BizError wrapped with %w", fmt.Errorf("call: %w", biz), true, kernel.CodeBiz},
		{"BizError joined", errors.Join(plain, biz), true, kernel.CodeBiz},
		{"BizError wrapped with %v", fmt.Errorf("call: %v", biz), false, kernel.CodeUnknown},
		{"framework network", kernel.Errorf(kernel.CodeNetwork, "down"), false, kernel.CodeNetwork},
		{"framework timeout", kernel.Errorf(kernel.CodeTimeout, "slow"), false, kernel.CodeTimeout},
		{"framework wrapped", fmt.Errorf("ctx: %w", kernel.Errorf(kernel.CodeNoProvider, "none")), false, kernel.CodeNoProvider},
		{"framework error around a biz error keeps the outer code", kernel.Wrap(kernel.CodeNetwork, biz, "send"), false, kernel.CodeNetwork},
		{"framework error around deadline keeps its code", kernel.Wrap(kernel.CodeNetwork, context.DeadlineExceeded, "x"), false, kernel.CodeNetwork},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false, kernel.CodeTimeout},
		{"wrapped DeadlineExceeded", fmt.Errorf("dial: %w", context.DeadlineExceeded), false, kernel.CodeTimeout},
		{"context.Canceled", context.Canceled, false, kernel.CodeUnknown},
		{"plain wrapped with %w", fmt.Errorf("x: %w", plain), false, kernel.CodeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kernel.IsBiz(tc.err); got != tc.wantBiz {
				t.Errorf("IsBiz(%v) = %v, want %v", tc.err, got, tc.wantBiz)
			}
			if got := kernel.CodeOf(tc.err); got != tc.code {
				t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.code)
			}
		})
	}
}

func TestBizError(t *testing.T) {
	if kernel.BizError(nil) != nil {
		t.Error("BizError(nil) != nil")
	}
	cause := fmt.Errorf("insufficient funds: %w", io.ErrUnexpectedEOF)
	biz := kernel.BizError(cause)
	if !errors.Is(biz, cause) || !errors.Is(biz, io.ErrUnexpectedEOF) {
		t.Error("BizError lost errors.Is to its cause")
	}
	var e *kernel.Error
	if !errors.As(biz, &e) || e.Code != kernel.CodeBiz || e.Cause != cause {
		t.Errorf("BizError = %#v, want *Error{Code: CodeBiz, Cause: cause}", biz)
	}
	if biz.Error() != cause.Error() {
		t.Errorf("biz message = %q, want the cause's %q", biz.Error(), cause.Error())
	}
	if again := kernel.BizError(biz); again != biz {
		t.Error("BizError of a biz error wrapped it again")
	}
	wrapped := fmt.Errorf("ctx: %w", biz)
	if again := kernel.BizError(wrapped); again != wrapped {
		t.Error("BizError of a wrapped biz error wrapped it again")
	}
	// A framework error becomes a biz error around it.
	fw := kernel.Errorf(kernel.CodeNetwork, "down")
	b2 := kernel.BizError(fw)
	if !kernel.IsBiz(b2) || !errors.Is(b2, fw) {
		t.Errorf("BizError(framework) = %v", b2)
	}
}

func TestErrorMessage(t *testing.T) {
	cause := errors.New("connection refused")
	tests := []struct {
		name string
		err  *kernel.Error
		want string
	}{
		{"Errorf", kernel.Errorf(kernel.CodeTimeout, "call %s after %dms", "sayHello", 500), "weft: timeout: call sayHello after 500ms"},
		{"Wrap", kernel.Wrap(kernel.CodeNetwork, cause, "dial %s", "h:1"), "weft: network: dial h:1: connection refused"},
		{"Wrap with empty message", kernel.Wrap(kernel.CodeNetwork, cause, ""), "weft: network: connection refused"},
		{"no provider", kernel.Errorf(kernel.CodeNoProvider, "x"), "weft: no provider: x"},
		{"method not found", kernel.Errorf(kernel.CodeMethodNotFound, "x"), "weft: method not found: x"},
		{"service not found", kernel.Errorf(kernel.CodeServiceNotFound, "x"), "weft: service not found: x"},
		{"limit exceeded", kernel.Errorf(kernel.CodeLimitExceeded, "x"), "weft: limit exceeded: x"},
		{"forbidden", kernel.Errorf(kernel.CodeForbidden, "x"), "weft: forbidden: x"},
		{"serialization", kernel.Errorf(kernel.CodeSerialization, "x"), "weft: serialization: x"},
		{"unknown", kernel.Errorf(kernel.CodeUnknown, "x"), "weft: unknown: x"},
		{"unnamed code", kernel.Errorf(kernel.Code(99), "x"), "weft: code(99): x"},
		{"biz with cause", &kernel.Error{Code: kernel.CodeBiz, Cause: cause}, "connection refused"},
		{"biz with message", &kernel.Error{Code: kernel.CodeBiz, Msg: "no funds"}, "no funds"},
		{"biz java class", &kernel.Error{Code: kernel.CodeBiz, Class: "java.lang.IllegalStateException", Msg: "bad"}, "java.lang.IllegalStateException: bad"},
		{"biz java class only", &kernel.Error{Code: kernel.CodeBiz, Class: "java.lang.NullPointerException"}, "java.lang.NullPointerException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if tc.err.Code != kernel.CodeBiz {
				prefix := "weft: " + tc.err.Code.String() + ":"
				if !strings.HasPrefix(tc.err.Error(), prefix) {
					t.Errorf("framework error %q does not start with %q", tc.err.Error(), prefix)
				}
			} else if strings.HasPrefix(tc.err.Error(), "weft:") {
				t.Errorf("biz error %q carries the framework prefix", tc.err.Error())
			}
		})
	}
	w := kernel.Wrap(kernel.CodeNetwork, cause, "dial")
	if !errors.Is(w, cause) || errors.Unwrap(w) != cause {
		t.Error("Wrap lost its cause")
	}
}

func TestCodeString(t *testing.T) {
	tests := []struct {
		code kernel.Code
		num  uint8
		want string
	}{
		{kernel.CodeUnknown, 0, "unknown"},
		{kernel.CodeNetwork, 1, "network"},
		{kernel.CodeTimeout, 2, "timeout"},
		{kernel.CodeBiz, 3, "biz"},
		{kernel.CodeForbidden, 4, "forbidden"},
		{kernel.CodeSerialization, 5, "serialization"},
		{kernel.CodeNoProvider, 6, "no provider"},
		{kernel.CodeLimitExceeded, 7, "limit exceeded"},
		{kernel.CodeMethodNotFound, 11, "method not found"},
		{kernel.CodeServiceNotFound, 14, "service not found"},
	}
	for _, tc := range tests {
		if uint8(tc.code) != tc.num {
			t.Errorf("%s = %d, want Dubbo's %d", tc.want, uint8(tc.code), tc.num)
		}
		if tc.code.String() != tc.want {
			t.Errorf("Code(%d).String() = %q, want %q", tc.num, tc.code.String(), tc.want)
		}
	}
}
