package hessian2

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// responseWithException is Dubbo's RESPONSE_WITH_EXCEPTION flag.
const responseWithException int32 = 0

// bizException stands for a Java exception class that a consumer knows.
type bizException struct {
	SerialVersionUID     int64
	DetailMessage        string
	SuppressedExceptions []Throwable
	StackTrace           []StackTraceElement
	Cause                Throwable
}

func (bizException) JavaClassName() string { return "org.weft.test.BizException" }
func (e bizException) Error() string       { return e.DetailMessage }

func init() { RegisterPOJO(&bizException{}) }

// responseBody is a Dubbo RESPONSE_WITH_EXCEPTION body as a provider writes it.
func responseBody(t *testing.T, err error) []byte {
	t.Helper()
	return marshal(t, responseWithException, ExceptionValue(err))
}

// consume decodes a response body as a consumer does.
func consume(t *testing.T, body []byte) (any, error) {
	t.Helper()
	d := NewDecoder(body)
	flag, err := d.Decode()
	if err != nil || flag != responseWithException {
		t.Fatalf("flag %v, %v", flag, err)
	}
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return v, ExceptionError(v)
}

func assertBiz(t *testing.T, err error, class, msg string) {
	t.Helper()
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeBiz || ke.Class != class || ke.Msg != msg {
		t.Fatalf("got %#v, want biz error %q: %q", err, class, msg)
	}
}

// TestExceptionPlainError: a plain Go error goes out as dubbo-go sends it, a
// java.lang.Throwable, byte for byte (the golden case is the library's
// encoding of java_exception.NewThrowable with the message).
func TestExceptionPlainError(t *testing.T) {
	err := errors.New("boom: ünïcode 😀")
	body := responseBody(t, err)
	want := goldenEntry(t, readGolden(t), "marshal/object/11", "bytes")
	if got := hex.EncodeToString(body); got != want {
		t.Fatalf("body % x, want %s", body, want)
	}
	v, got := consume(t, body)
	// The library's own type for java.lang.Throwable.
	if th, ok := v.(Throwable); !ok || th.JavaClassName() != throwableClass || fmt.Sprintf("%T", v) != "*java_exception.Throwable" {
		t.Fatalf("decoded %T %+v", v, v)
	}
	assertBiz(t, got, "java.lang.Throwable", err.Error())
	// And so does a business error without a class.
	_, got = consume(t, responseBody(t, kernel.BizError(err)))
	assertBiz(t, got, "java.lang.Throwable", err.Error())
}

// TestExceptionClassKnownToConsumer: a business error naming a class goes
// out as an object of that class, which a consumer that registered the class
// decodes into it, and one that did not into an UnknownException of the
// class; java.lang.IllegalStateException, which the library knows, into
// the library's type.
func TestExceptionClassKnownToConsumer(t *testing.T) {
	for _, c := range []struct {
		class string
		typ   string
	}{
		{"org.weft.test.BizException", "*hessian2.bizException"},
		{"java.lang.IllegalStateException", "*java_exception.IllegalStateException"},
		{"org.weft.test.NobodyRegisteredThis", "*hessian2.UnknownException"},
	} {
		err := &kernel.Error{Code: kernel.CodeBiz, Class: c.class, Msg: "bad state"}
		v, got := consume(t, responseBody(t, err))
		if fmt.Sprintf("%T", v) != c.typ {
			t.Fatalf("decoded %T", v)
		}
		th, ok := v.(Throwable)
		if !ok || th.JavaClassName() != c.class {
			t.Fatalf("decoded %#v", v)
		}
		assertBiz(t, got, c.class, "bad state")
		if !errors.As(got, &th) {
			t.Fatal("the Throwable is not the cause")
		}
	}
}

// TestExceptionClassUnknownToConsumer: a class nobody registered decodes
// into an UnknownException that keeps the class (the library's loses it).
func TestExceptionClassUnknownToConsumer(t *testing.T) {
	for _, class := range []string{"com.example.NotRegisteredException", "com.example.Other"} {
		err := &kernel.Error{Code: kernel.CodeBiz, Class: class, Msg: "no such order 42"}
		body := responseBody(t, err)
		v, got := consume(t, body)
		u, ok := v.(*UnknownException)
		if !ok {
			t.Fatalf("decoded %T", v)
		}
		if u.JavaClassName() != class || u.DetailMessage != "no such order 42" {
			t.Fatalf("class %q, message %q", u.JavaClassName(), u.DetailMessage)
		}
		assertBiz(t, got, class, "no such order 42")
		if got.Error() != class+": no such order 42" {
			t.Fatalf("Error() %q", got.Error())
		}
		// Passing it on (a Go provider relaying a Java one's error) keeps
		// the class.
		_, again := consume(t, responseBody(t, kernel.BizError(u)))
		assertBiz(t, again, class, "no such order 42")
	}
}

func TestExceptionThrowablerPassesThrough(t *testing.T) {
	ex := &UnknownException{Class: "java.lang.IllegalArgumentException", DetailMessage: "bad arg"}
	if v := ExceptionValue(ex); v != ex {
		t.Fatalf("got %#v", v)
	}
	wrapped := fmt.Errorf("calling: %w", kernel.BizError(ex))
	if v := ExceptionValue(wrapped); v != ex {
		t.Fatalf("wrapped: got %#v", v)
	}
	_, got := consume(t, responseBody(t, wrapped))
	assertBiz(t, got, "java.lang.IllegalArgumentException", "bad arg")
	// A kernel.Error's own class wins over a cause of another class.
	ke := &kernel.Error{Code: kernel.CodeBiz, Class: "org.weft.test.BizException", Msg: "m", Cause: ex}
	_, got = consume(t, responseBody(t, ke))
	assertBiz(t, got, "org.weft.test.BizException", "m")
	if ExceptionValue(nil) != nil {
		t.Fatal("nil error")
	}
}

func TestExceptionError(t *testing.T) {
	generic := NewGenericException("com.foo.Orig", "orig message")
	generic.DetailMessage = "com.foo.Orig: orig message\n\tat ..."
	var nilTh *UnknownException
	cases := []struct {
		v          any
		class, msg string
	}{
		{"plain string", "", "plain string"},
		{nil, "", "exception response without an exception"},
		{nilTh, "", "exception response without an exception"},
		{&UnknownException{Class: "java.lang.NullPointerException", DetailMessage: "npe"}, "java.lang.NullPointerException", "npe"},
		{&bizException{DetailMessage: "biz"}, "org.weft.test.BizException", "biz"},
		{generic, "com.foo.Orig", "orig message"},
		{map[string]any{"_class": "com.foo.X", "detailMessage": "dm"}, "com.foo.X", "dm"},
		{map[any]any{"_class": "com.foo.Y", "message": "m"}, "com.foo.Y", "m"},
		{errors.New("go error"), "", "go error"},
		{int32(7), "", "7"},
	}
	for _, c := range cases {
		assertBiz(t, ExceptionError(c.v), c.class, c.msg)
	}
}

// An exception body that is no exception but a value containing itself
// (found by FuzzDecodeAndWalk: the message was made with fmt's %v, which
// overflowed the consumer's stack) becomes a bounded message.
func TestExceptionOfACyclicValue(t *testing.T) {
	v, err := NewDecoder([]byte{0x79, 0x51, 0x90}).Decode()
	if err != nil {
		t.Fatal(err)
	}
	e := ExceptionError(v)
	if msg := e.Error(); !strings.Contains(msg, "(cycle)") || len(msg) > 1000 {
		t.Fatalf("message %q", msg)
	}
}
