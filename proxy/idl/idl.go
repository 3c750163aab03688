// Package idl serves and calls interfaces declared in config rather than in
// Go: by a protobuf IDL read at start-up (dynamic messages, no generated
// code), or by a table of methods with Java type names for hessian2. A
// declared interface is implemented by a Handler (a forward to a
// reference, a WASM module): Invoker puts each call's arguments in the
// declared types whatever protocol and encoding brought them, and the
// handler's result in the form the caller's protocol writes.
package idl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Limits on what an IDL file may make the start-up read: a config names the
// file, and whoever wrote it is not trusted with the App's memory.
const (
	// MaxFileBytes bounds one .proto file or descriptor set.
	MaxFileBytes = 4 << 20
	// MaxFiles bounds the files one IDL imports, transitively.
	MaxFiles = 256
	// parseTimeout bounds the compile of one IDL.
	parseTimeout = 10 * time.Second
)

// Interface is a service interface declared in config.
type Interface struct {
	// Name is the declared service's name: a protobuf service's full name
	// (pkg.Greeter), or the config's interface for a method table.
	Name string
	// Service is the protobuf service; nil for a method table.
	Service protoreflect.ServiceDescriptor
	methods map[string]*Method // by each name a caller may use
	names   []string           // wire names, sorted
}

// Method is one declared method.
type Method struct {
	// Name is the method's name as declared (a proto rpc's, "SayHello";
	// a table's, "sayHello"). Callers may use it with its first letter
	// lowered or raised too: gRPC sends the rpc's name, Java and dubbo-go
	// the Java method's.
	Name string
	// In and Out are a proto method's messages; nil in a method table.
	In, Out protoreflect.MessageDescriptor
	// Params and Returns are the Java types of a method table's method
	// ("java.lang.String", "long", "org.example.User"); for a proto
	// method, Params is empty unless the table also gives them (the
	// request's fields, in order, become those parameters when the call
	// is passed to a hessian2 peer).
	Params  []string
	Returns string
	// Stream is the method's kind; only unary methods are served by a
	// Handler today.
	Stream kernel.StreamKind

	// What a forward writes, worked out once (prepare): the JVM
	// descriptor of a table method whose parameters are all Java scalars
	// ("" otherwise), and the Java class of a proto method's request.
	descriptor, inClass string
}

// prepare works out, once, what each call of m would otherwise compute.
func (m *Method) prepare() {
	if m.In != nil {
		m.inClass = JavaClass(m.In)
		return
	}
	if descriptorOK(m.Params) {
		m.descriptor = Descriptor(m.Params)
	}
}

// Proto reports whether the method's types are protobuf messages.
func (m *Method) Proto() bool { return m.In != nil }

// MethodNames lists the wire names of the methods, sorted.
func (it *Interface) MethodNames() []string { return append([]string(nil), it.names...) }

// Method finds a method by any name a caller may use for it.
func (it *Interface) Method(name string) (*Method, bool) {
	m, ok := it.methods[name]
	return m, ok
}

// StreamKinds are the streaming methods' kinds by every name.
func (it *Interface) StreamKinds() map[string]kernel.StreamKind {
	out := map[string]kernel.StreamKind{}
	for n, m := range it.methods {
		if m.Stream != kernel.Unary {
			out[n] = m.Stream
		}
	}
	return out
}

// File is the protobuf file that declares the service; nil for a method
// table (gRPC reflection lists what it has).
func (it *Interface) File() protoreflect.FileDescriptor {
	if it.Service == nil {
		return nil
	}
	return it.Service.ParentFile()
}

func (it *Interface) add(m *Method) error {
	names := []string{m.Name, view.WireName(m.Name), upperFirst(m.Name)}
	for _, n := range names {
		if o, ok := it.methods[n]; ok && o != m {
			return fmt.Errorf("methods %s and %s of %s are the same method to a caller that changes the first letter's case", o.Name, m.Name, it.Name)
		}
	}
	for _, n := range names {
		it.methods[n] = m
	}
	it.names = append(it.names, m.Name)
	return nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// MethodTypes are one method of a method table: Java type names.
type MethodTypes struct {
	Params  []string
	Returns string
}

// FromTable declares the interface name by a method table with Java
// types, as Java and dubbo-go peers call it over hessian2.
func FromTable(name string, methods map[string]MethodTypes) (*Interface, error) {
	if len(methods) == 0 {
		return nil, fmt.Errorf("interface %s declares no method: give methods.<name>.params and returns", name)
	}
	it := &Interface{Name: name, methods: map[string]*Method{}}
	for _, n := range sortedKeys(methods) {
		mt := methods[n]
		for i, p := range mt.Params {
			if err := checkJavaType(p); err != nil {
				return nil, fmt.Errorf("methods.%s.params[%d]: %w", n, i, err)
			}
		}
		if mt.Returns != "" {
			if err := checkJavaType(mt.Returns); err != nil {
				return nil, fmt.Errorf("methods.%s.returns: %w", n, err)
			}
		}
		m := &Method{Name: n, Params: mt.Params, Returns: mt.Returns}
		m.prepare()
		if err := it.add(m); err != nil {
			return nil, err
		}
	}
	sort.Strings(it.names)
	return it, nil
}

// LoadProto reads the protobuf IDL at path — a .proto file, compiled here
// with the files it imports (looked up beside it, then in importPaths),
// or a descriptor set (protoc -o, protoc --descriptor_set_out, any other
// extension) — and declares its service named service (its full name, or
// its simple name; may be empty when the file has one service). Methods
// in table (Java types for hessian2 peers) are laid over the rpcs of the
// same name.
func LoadProto(path, service string, importPaths []string, table map[string]MethodTypes) (*Interface, error) {
	var fd protoreflect.FileDescriptor
	var err error
	if strings.HasSuffix(path, ".proto") {
		fd, err = compileProto(path, importPaths)
	} else {
		fd, err = readDescriptorSet(path)
	}
	if err != nil {
		return nil, err
	}
	sd, err := findService(fd, service, path)
	if err != nil {
		return nil, err
	}
	it := &Interface{Name: string(sd.FullName()), Service: sd, methods: map[string]*Method{}}
	ms := sd.Methods()
	for i := range ms.Len() {
		md := ms.Get(i)
		m := &Method{Name: string(md.Name()), In: md.Input(), Out: md.Output()}
		m.prepare()
		switch {
		case md.IsStreamingClient() && md.IsStreamingServer():
			m.Stream = kernel.BidiStreaming
		case md.IsStreamingClient():
			m.Stream = kernel.ClientStreaming
		case md.IsStreamingServer():
			m.Stream = kernel.ServerStreaming
		}
		if err := it.add(m); err != nil {
			return nil, err
		}
	}
	sort.Strings(it.names)
	for _, n := range sortedKeys(table) {
		m, ok := it.methods[n]
		if !ok {
			return nil, fmt.Errorf("methods.%s: %s has no rpc %s (its rpcs: %s)", n, it.Name, n, strings.Join(it.names, ", "))
		}
		mt := table[n]
		for i, p := range mt.Params {
			if err := checkJavaType(p); err != nil {
				return nil, fmt.Errorf("methods.%s.params[%d]: %w", n, i, err)
			}
		}
		if len(mt.Params) > 0 && len(mt.Params) != m.In.Fields().Len() {
			return nil, fmt.Errorf("methods.%s.params: %d Java parameters for %s's %d fields: each field of the request, in order, is one parameter",
				n, len(mt.Params), m.In.FullName(), m.In.Fields().Len())
		}
		m.Params, m.Returns = mt.Params, mt.Returns
	}
	sort.Strings(it.names)
	return it, nil
}

func findService(fd protoreflect.FileDescriptor, service, path string) (protoreflect.ServiceDescriptor, error) {
	ss := fd.Services()
	var names []string
	for i := range ss.Len() {
		names = append(names, string(ss.Get(i).FullName()))
	}
	if service == "" {
		if ss.Len() == 1 {
			return ss.Get(0), nil
		}
		if ss.Len() == 0 {
			return nil, fmt.Errorf("%s declares no service", path)
		}
		return nil, fmt.Errorf("%s declares %d services (%s): name one with service: <name>", path, ss.Len(), strings.Join(names, ", "))
	}
	for i := range ss.Len() {
		s := ss.Get(i)
		if string(s.FullName()) == service || string(s.Name()) == service {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s declares no service %s (its services: %s)", path, service, strings.Join(names, ", "))
}

// compileProto compiles a .proto file and what it imports, each read
// within MaxFileBytes, no more than MaxFiles of them.
func compileProto(path string, importPaths []string) (protoreflect.FileDescriptor, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	files := 0
	resolver := &protocompile.SourceResolver{
		ImportPaths: append([]string{dir}, importPaths...),
		Accessor: func(p string) (io.ReadCloser, error) {
			if files++; files > MaxFiles {
				return nil, fmt.Errorf("more than %d files imported", MaxFiles)
			}
			b, err := readBounded(p)
			if err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		},
	}
	var reports []string
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(resolver),
		Reporter: collect(&reports),
	}
	ctx, cancel := context.WithTimeout(context.Background(), parseTimeout)
	defer cancel()
	out, err := c.Compile(ctx, name)
	if err != nil {
		if len(reports) > 0 {
			return nil, fmt.Errorf("%s does not compile: %s", path, strings.Join(reports, "; "))
		}
		return nil, fmt.Errorf("%s does not compile: %w", path, err)
	}
	return out[0], nil
}

// reporter keeps the first errors protocompile finds, so that the error
// names them all (up to a few), with their lines.
func collect(into *[]string) reporter.Reporter {
	return reporter.NewReporter(func(err reporter.ErrorWithPos) error {
		if len(*into) < 5 {
			*into = append(*into, err.Error())
		}
		return nil // go on: report the file's errors, then fail
	}, nil)
}

func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s is over %d bytes", p, MaxFileBytes)
	}
	return b, nil
}

// readDescriptorSet reads a FileDescriptorSet (protoc -o) and returns its
// last file, the one protoc was asked for (with --include_imports the
// others come before it).
func readDescriptorSet(path string) (protoreflect.FileDescriptor, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s is neither a .proto file nor a descriptor set (protoc -o): %w", path, err)
	}
	if len(set.File) == 0 {
		return nil, fmt.Errorf("%s is an empty descriptor set", path)
	}
	if len(set.File) > MaxFiles {
		return nil, fmt.Errorf("%s holds %d files, more than %d", path, len(set.File), MaxFiles)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (a set written by protoc --include_imports holds what it imports)", path, err)
	}
	fd, err := files.FindFileByPath(set.File[len(set.File)-1].GetName())
	if err != nil {
		return nil, err
	}
	return fd, nil
}

// checkJavaType refuses what cannot be a Java type name.
func checkJavaType(t string) error {
	if t == "" {
		return errors.New("an empty Java type")
	}
	for _, r := range t {
		if !(r == '.' || r == '$' || r == '_' || r == '[' || r == ']' || r == ';' ||
			r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("%q is not a Java type name (java.lang.String, long, org.example.User, int[])", t)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
