package idl

import (
	"context"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/proxy"
)

// ForwardOptions say how a forward calls its reference.
type ForwardOptions struct {
	// Messages: the reference calls over Triple with protobuf messages,
	// so a proto method's request goes as it is. Otherwise every call is
	// Dubbo's generic call ($invoke with Java types, POJOs as maps), which
	// Java, dubbo-go and weft providers answer over dubbo and tri alike.
	Messages bool
}

// Forward serves a declared interface by calling the invoker target
// returns (a reference's: its cluster, load balancer, routers, filters)
// for each call: the call's attachments go along (but those that address
// this hop: path, interface, version, group, timeout, token), the call's
// deadline bounds the forward, and the answer comes back as the reference
// got it — its value, its attachments, its error with its code and, for a
// business error, its Java class.
func Forward(target func() (kernel.Invoker, error), o ForwardOptions) Handler {
	return HandlerFunc(func(ctx context.Context, c *Call) (kernel.Result, error) {
		iv, err := target()
		if err != nil {
			return kernel.Result{}, err
		}
		var out *kernel.Invocation
		m := c.Method
		switch {
		case m.Proto() && o.Messages:
			out = kernel.NewInvocation(m.Name, c.Args...)
		case m.Proto() && len(m.Params) > 0:
			// The request's fields are the Java method's parameters.
			msg := c.Args[0].(protoreflect.ProtoMessage).ProtoReflect()
			fields := messageValue(msg, "", 0)
			fs := m.In.Fields()
			args := make([]any, fs.Len())
			for i := range args {
				args[i] = fields[fs.Get(i).JSONName()]
			}
			out = proxy.GenericInvocation(view.WireName(m.Name), m.Params, args)
		case m.Proto():
			msg := c.Args[0].(protoreflect.ProtoMessage).ProtoReflect()
			out = proxy.GenericInvocation(view.WireName(m.Name), []string{m.inClass}, []any{messageValue(msg, m.inClass, 0)})
		case m.descriptor != "" || len(m.Params) == 0:
			// Java's scalar types: an ordinary call with the JVM
			// descriptor, as a typed Java consumer makes it; a generic
			// call's conversions on both ends cost more than the hop.
			out = &kernel.Invocation{Method: m.Name, ParamTypes: m.descriptor, Args: c.Args}
		default:
			out = proxy.GenericInvocation(m.Name, m.Params, c.Args)
		}
		CopyAttachments(out, c.Inv)
		return iv.Invoke(ctx, out)
	})
}

// Pass is the invocation that forwards in as it came, for an interface
// that is not declared: the same method and arguments as the protocol
// read them (hessian2 values with their Java descriptor; Triple's message
// bytes, which a Triple provider reads as they are), and the attachments
// but the hop's. JSON arguments (Triple's HTTP/1.1 form) say no Java
// types: they go as Dubbo's generic call, whose provider finds the method
// by its name.
func Pass(in *kernel.Invocation) (*kernel.Invocation, error) {
	var out *kernel.Invocation
	for i, a := range in.Args {
		e, ok := a.(kernel.Encoded)
		if !ok || e.Encoding() != "json" {
			continue
		}
		args := make([]any, len(in.Args))
		copy(args, in.Args)
		for j := i; j < len(args); j++ {
			if e, ok := args[j].(kernel.Encoded); ok && e.Encoding() == "json" {
				v, err := javaValue(e, "java.lang.Object")
				if err != nil {
					return nil, kernel.Wrap(kernel.CodeSerialization, err, "argument %d", j)
				}
				args[j] = v
			}
		}
		out = proxy.GenericInvocation(in.Method, nil, args)
		break
	}
	if out == nil {
		out = &kernel.Invocation{Method: in.Method, ParamTypes: in.ParamTypes, Args: in.Args}
	}
	CopyAttachments(out, in)
	return out, nil
}

// jvmScalars are the Java types whose values a Go value written by hessian2
// is, whatever the peer: no POJO to realize.
var jvmScalars = map[string]string{
	"boolean": "Z", "byte": "B", "char": "C", "short": "S", "int": "I", "long": "J", "float": "F", "double": "D",
	"byte[]": "[B", "[B": "[B",
	"java.lang.String": "Ljava/lang/String;", "java.lang.Boolean": "Ljava/lang/Boolean;", "java.lang.Integer": "Ljava/lang/Integer;",
	"java.lang.Long": "Ljava/lang/Long;", "java.lang.Double": "Ljava/lang/Double;", "java.lang.Float": "Ljava/lang/Float;",
	"java.lang.Short": "Ljava/lang/Short;", "java.lang.Byte": "Ljava/lang/Byte;", "java.lang.Character": "Ljava/lang/Character;",
}

func descriptorOK(types []string) bool {
	for _, t := range types {
		if _, ok := jvmScalars[t]; !ok {
			return false
		}
	}
	return true
}

// Descriptor is the JVM parameter descriptor of Java types
// ("Ljava/lang/String;J"): Dubbo's, in every call's header.
func Descriptor(types []string) string {
	var b strings.Builder
	for _, t := range types {
		if d, ok := jvmScalars[t]; ok {
			b.WriteString(d)
			continue
		}
		dims := 0
		for strings.HasSuffix(t, "[]") {
			t, dims = strings.TrimSuffix(t, "[]"), dims+1
		}
		b.WriteString(strings.Repeat("[", dims))
		if d, ok := jvmScalars[t]; ok && len(d) == 1 {
			b.WriteString(d)
		} else {
			b.WriteString("L" + strings.ReplaceAll(t, ".", "/") + ";")
		}
	}
	return b.String()
}

// hopKeys are the attachments that address one hop of a call: a forward
// sets its own.
var hopKeys = map[string]bool{
	kernel.KeyPath: true, kernel.KeyInterface: true, kernel.KeyVersion: true, kernel.KeyGroup: true,
	kernel.KeyTimeout: true, kernel.KeyToken: true, kernel.KeyDubbo: true, "generic": true,
	"remote.application": true, "input": true, "output": true,
}

// CopyAttachments sets on out the attachments of in that travel on with
// a forwarded call: not those that address the hop in came by.
func CopyAttachments(out, in *kernel.Invocation) {
	if in == nil {
		return
	}
	for k, v := range in.Attachments() {
		if !hopKeys[k] && !strings.HasPrefix(k, "tri-") && !strings.HasPrefix(k, ":") {
			out.SetAttachment(k, v)
		}
	}
}

// JavaClass is the Java class protoc's Java plugin generates for md:
// java_package (or the proto package), the outer class unless
// java_multiple_files, and the nesting of md.
func JavaClass(md protoreflect.MessageDescriptor) string {
	fd := md.ParentFile()
	pkg := string(fd.Package())
	var outer string
	multiple := false
	if opts := fd.Options(); opts != nil {
		if jo, ok := opts.(interface {
			GetJavaPackage() string
			GetJavaMultipleFiles() bool
			GetJavaOuterClassname() string
		}); ok {
			if p := jo.GetJavaPackage(); p != "" {
				pkg = p
			}
			multiple = jo.GetJavaMultipleFiles()
			outer = jo.GetJavaOuterClassname()
		}
	}
	name := strings.TrimPrefix(string(md.FullName()), string(fd.Package())+".")
	name = strings.ReplaceAll(name, ".", "$")
	if !multiple {
		if outer == "" {
			outer = outerClassName(fd.Path())
			// protoc's rule when a top-level type has that name.
			if fd.Messages().ByName(protoreflect.Name(outer)) != nil || fd.Enums().ByName(protoreflect.Name(outer)) != nil ||
				fd.Services().ByName(protoreflect.Name(outer)) != nil {
				outer += "OuterClass"
			}
		}
		name = outer + "$" + name
	}
	if pkg == "" {
		return name
	}
	return pkg + "." + name
}

// outerClassName is protoc's default outer class: the file's base name in
// CamelCase.
func outerClassName(path string) string {
	base := path[strings.LastIndex(path, "/")+1:]
	base = strings.TrimSuffix(base, ".proto")
	var b strings.Builder
	up := true
	for _, r := range base {
		switch {
		case r == '_' || r == '-' || r == '.':
			up = true
		case up && r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			up = false
		default:
			b.WriteRune(r)
			up = r >= '0' && r <= '9'
		}
	}
	return b.String()
}
