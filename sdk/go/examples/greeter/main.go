// Command greeter is a service written in Go and compiled to WASM: the
// implementation of org.example.Greeter (sayHello, echo) for a weft
// service configured with impl: {wasm: greeter.wasm}, whether its interface
// is declared by Java types (string arguments and results) or by a
// protobuf IDL (a request object with a name or msg field).
package main

import (
	"github.com/weftrpc/weft/sdk/go/weft"
	_ "github.com/weftrpc/weft/sdk/go/weft/service"
)

func init() {
	weft.Serve(func(c *weft.Call) (string, error) {
		// An attachment answered with one: x-req comes back as x-resp.
		if x, ok := c.Attachment("x-req"); ok {
			c.SetAttachment("x-resp", "resp-"+x)
		}
		method := c.Method()
		// A string argument is read without parsing JSON, and a string
		// answered without writing it: the fast way.
		if s, ok := c.ArgString(0); ok {
			switch method {
			case "echo", "Echo":
				return "", c.ReturnString(s)
			case "sayHello", "SayHello":
				if s == "" {
					return "", emptyName
				}
				return "", c.ReturnString(greet(c, s))
			}
		}
		// A method declared by a protobuf IDL gets its request as an
		// object and answers one.
		args, err := c.Args()
		if err != nil {
			return "", &weft.Error{Code: weft.CodeSerialization, Message: "arguments: " + err.Error()}
		}
		var req map[string]any
		if len(args) > 0 {
			req, _ = args[0].(map[string]any)
		}
		switch method {
		case "echo", "Echo":
			msg, _ := req["msg"].(string)
			if msg == "fail" {
				return "", &weft.Error{Code: weft.CodeBiz, Message: "fail: idl"}
			}
			return `{"msg":` + weft.JSONString(msg) + `}`, nil
		case "sayHello", "SayHello":
			name, _ := req["name"].(string)
			if name == "" {
				return "", emptyName
			}
			return `{"message":` + weft.JSONString(greet(c, name)) + `}`, nil
		}
		return "", &weft.Error{Code: weft.CodeUnknown, Message: "no method " + method}
	})
}

var emptyName = &weft.Error{Code: weft.CodeBiz, Class: "java.lang.IllegalArgumentException", Message: "name is empty"}

func greet(c *weft.Call, name string) string {
	if suffix, ok := c.Attachment("suffix"); ok {
		name += suffix
	}
	c.SetAttachment("served-by", "wasm-go")
	return "hello " + name
}

func main() {} // never run in a reactor module: handlers register in init
