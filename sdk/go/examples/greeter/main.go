// Command greeter is a service written in Go and compiled to WASM: the
// implementation of org.example.Greeter (sayHello, echo) for a weft
// service configured with impl: {wasm: greeter.wasm}.
package main

import (
	"github.com/weftrpc/weft/sdk/go/weft"
	_ "github.com/weftrpc/weft/sdk/go/weft/service"
)

func init() {
	weft.Serve(func(c *weft.Call) (string, error) {
		// A string argument is read without parsing JSON, and a string
		// answered without writing it: the fast way.
		if s, ok := c.ArgString(0); ok {
			switch c.Method() {
			case "echo":
				return "", c.ReturnString(s)
			case "sayHello", "SayHello":
				if s != "" {
					if suffix, ok := c.Attachment("suffix"); ok {
						s += suffix
					}
					c.SetAttachment("served-by", "wasm-go")
					return "", c.ReturnString("hello " + s)
				}
			}
		}
		args, err := c.Args()
		if err != nil {
			return "", &weft.Error{Code: weft.CodeSerialization, Message: "arguments: " + err.Error()}
		}
		// A method declared with Java types gets its arguments as they
		// are; one declared by a protobuf IDL gets its request as an
		// object (HelloRequest{name}) and answers one (HelloReply{message}).
		var first string
		object := false
		if len(args) > 0 {
			switch a := args[0].(type) {
			case string:
				first = a
			case map[string]any:
				first, _ = a["name"].(string)
				object = true
			}
		}
		switch c.Method() {
		case "sayHello", "SayHello":
			if first == "" {
				return "", &weft.Error{Code: weft.CodeBiz, Class: "java.lang.IllegalArgumentException", Message: "name is empty"}
			}
			if suffix, ok := c.Attachment("suffix"); ok {
				first += suffix
			}
			c.SetAttachment("served-by", "wasm-go")
			if object {
				return `{"message":` + weft.JSONString("hello "+first) + `}`, nil
			}
			return weft.JSONString("hello " + first), nil
		case "echo":
			return weft.JSONString(first), nil
		}
		return "", &weft.Error{Code: weft.CodeUnknown, Message: "no method " + c.Method()}
	})
}

func main() {} // never run in a reactor module: handlers register in init
