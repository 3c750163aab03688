package triple

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/weftrpc/weft/kernel"
	netty "github.com/weftrpc/weft/transport-netty"
)

// gRPC server reflection (grpc/grpc's doc/server-reflection.md), answered
// by every Triple server, so that grpcurl and other tools list its services
// and describe their messages without the .proto files. The descriptors
// come from protobuf's registry: those of the generated code linked into
// the program (a service of plain Go types has none, and is listed only).
const (
	reflectionV1      = "grpc.reflection.v1.ServerReflection"
	reflectionV1alpha = "grpc.reflection.v1alpha.ServerReflection"
)

// The fields of ServerReflectionRequest and ServerReflectionResponse.
const (
	reqHost                 = 1
	reqFileByFilename       = 3
	reqFileContainingSymbol = 4
	reqFileContainingExt    = 5
	reqAllExtensionNumbers  = 6
	reqListServices         = 7

	respValidHost        = 1
	respOriginalRequest  = 2
	respFileDescriptor   = 4
	respAllExtensions    = 5
	respListServices     = 6
	respError            = 7
	grpcNotFound         = 5
	grpcInvalidArgument  = 3
	maxReflectionReplies = 1 << 16
)

// Described is an exported invoker that carries its service's protobuf
// file: a service declared by an IDL in config, whose descriptors are in
// no registry of the program. Reflection describes it from that file and
// the files it imports.
type Described interface {
	ProtoFile() protoreflect.FileDescriptor
}

// exportedFiles are the files of the exported services that carry theirs
// (Described), with what they import.
func (h *handler) exportedFiles() *protoregistry.Files {
	var files protoregistry.Files
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		_ = files.RegisterFile(fd) // a name two files declare: the first stays
		imps := fd.Imports()
		for i := range imps.Len() {
			add(imps.Get(i).FileDescriptor)
		}
	}
	h.s.exporters.Each(func(_ string, e *exporter) {
		if d, ok := e.invoker.(Described); ok {
			if fd := d.ProtoFile(); fd != nil {
				add(fd)
			}
		}
	})
	return &files
}

// reflection serves one ServerReflectionInfo stream.
func (h *handler) reflection(all *serverCall) *netty.Response {
	c := &all.call
	ss := all.ss
	if c.method != "ServerReflectionInfo" {
		return trailersOnly(c.st.id, statusUnimplemented, kernel.CodeMethodNotFound, fmt.Sprintf("%s/%s: the method is ServerReflectionInfo", c.service, cut(c.method)))
	}
	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	all.inv = kernel.Invocation{Method: c.method}
	ctx := all.cc.StartCancelable(context.Background(), &all.inv, deadline)
	defer all.cc.Release()
	ss.ctx = ctx
	sc := c.st.sc
	sc.mu.Lock()
	c.st.cc = &all.cc
	sc.mu.Unlock()
	for range maxReflectionReplies {
		req, err := ss.recvRaw()
		if err == io.EOF {
			return ss.trailers(statusOK, 0, "", nil)
		}
		if err != nil {
			return nil // reset, or the connection is gone
		}
		resp, err := h.reflect(req)
		if err != nil {
			return ss.trailers(statusInvalidArgument, kernel.CodeSerialization, "ServerReflectionRequest: "+err.Error(), nil)
		}
		if err := ss.sendRaw(resp); err != nil {
			return nil
		}
	}
	return ss.trailers(statusResourceExhausted, kernel.CodeLimitExceeded, "too many requests on one reflection stream", nil)
}

// reflect answers one ServerReflectionRequest.
func (h *handler) reflect(req []byte) ([]byte, error) {
	var host string
	var kind protowire.Number
	var arg []byte
	for b := req; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			switch num {
			case reqHost:
				host = string(v)
			case reqFileByFilename, reqFileContainingSymbol, reqFileContainingExt, reqAllExtensionNumbers, reqListServices:
				kind, arg = num, v
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	var out []byte
	out = protowire.AppendTag(out, respValidHost, protowire.BytesType)
	out = protowire.AppendString(out, host)
	out = protowire.AppendTag(out, respOriginalRequest, protowire.BytesType)
	out = protowire.AppendBytes(out, req)
	switch kind {
	case reqListServices:
		var list []byte
		for _, name := range h.serviceNames() {
			var svc []byte
			svc = protowire.AppendTag(svc, 1, protowire.BytesType)
			svc = protowire.AppendString(svc, name)
			list = protowire.AppendTag(list, 1, protowire.BytesType)
			list = protowire.AppendBytes(list, svc)
		}
		out = protowire.AppendTag(out, respListServices, protowire.BytesType)
		return protowire.AppendBytes(out, list), nil
	case reqFileByFilename:
		fd, err := h.exportedFiles().FindFileByPath(string(arg))
		if err != nil {
			fd, err = protoregistry.GlobalFiles.FindFileByPath(string(arg))
		}
		if err != nil {
			fd, err = healthFiles.FindFileByPath(string(arg))
		}
		if err != nil {
			return appendReflectionError(out, grpcNotFound, fmt.Sprintf("file %q not found", cut(string(arg)))), nil
		}
		return appendFiles(out, fd)
	case reqFileContainingSymbol:
		d, err := h.exportedFiles().FindDescriptorByName(protoreflect.FullName(arg))
		if err != nil {
			d, err = protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(arg))
		}
		if err != nil {
			d, err = healthFiles.FindDescriptorByName(protoreflect.FullName(arg))
		}
		if err != nil {
			return appendReflectionError(out, grpcNotFound, fmt.Sprintf("symbol %q not found (a service of plain Go types has no descriptor)", cut(string(arg)))), nil
		}
		return appendFiles(out, d.ParentFile())
	case reqFileContainingExt:
		typ, num, err := extensionRequest(arg)
		if err != nil {
			return nil, err
		}
		xt, err := protoregistry.GlobalTypes.FindExtensionByNumber(protoreflect.FullName(typ), protoreflect.FieldNumber(num))
		if err != nil {
			return appendReflectionError(out, grpcNotFound, fmt.Sprintf("extension %d of %q not found", num, cut(typ))), nil
		}
		return appendFiles(out, xt.TypeDescriptor().ParentFile())
	case reqAllExtensionNumbers:
		var nums []byte
		nums = protowire.AppendTag(nums, 1, protowire.BytesType)
		nums = protowire.AppendString(nums, string(arg))
		protoregistry.GlobalTypes.RangeExtensionsByMessage(protoreflect.FullName(arg), func(xt protoreflect.ExtensionType) bool {
			nums = protowire.AppendTag(nums, 2, protowire.VarintType)
			nums = protowire.AppendVarint(nums, uint64(xt.TypeDescriptor().Number()))
			return true
		})
		out = protowire.AppendTag(out, respAllExtensions, protowire.BytesType)
		return protowire.AppendBytes(out, nums), nil
	}
	return appendReflectionError(out, grpcInvalidArgument, "no request in the ServerReflectionRequest"), nil
}

func extensionRequest(b []byte) (string, int32, error) {
	var typ string
	var num int32
	for len(b) > 0 {
		n, wt, k := protowire.ConsumeTag(b)
		if k < 0 {
			return "", 0, protowire.ParseError(k)
		}
		b = b[k:]
		switch {
		case n == 1 && wt == protowire.BytesType:
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return "", 0, protowire.ParseError(m)
			}
			typ, b = v, b[m:]
		case n == 2 && wt == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return "", 0, protowire.ParseError(m)
			}
			num, b = int32(v), b[m:]
		default:
			m := protowire.ConsumeFieldValue(n, wt, b)
			if m < 0 {
				return "", 0, protowire.ParseError(m)
			}
			b = b[m:]
		}
	}
	if typ == "" {
		return "", 0, errors.New("ExtensionRequest without containing_type")
	}
	return typ, num, nil
}

// appendFiles appends a FileDescriptorResponse: fd and the files it
// depends on, transitively, each once.
func appendFiles(out []byte, fd protoreflect.FileDescriptor) ([]byte, error) {
	var files []byte
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor) error
	add = func(f protoreflect.FileDescriptor) error {
		if seen[f.Path()] {
			return nil
		}
		seen[f.Path()] = true
		b, err := proto.Marshal(protodesc.ToFileDescriptorProto(f))
		if err != nil {
			return err
		}
		files = protowire.AppendTag(files, 1, protowire.BytesType)
		files = protowire.AppendBytes(files, b)
		imports := f.Imports()
		for i := range imports.Len() {
			if err := add(imports.Get(i).FileDescriptor); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(fd); err != nil {
		return nil, err
	}
	out = protowire.AppendTag(out, respFileDescriptor, protowire.BytesType)
	return protowire.AppendBytes(out, files), nil
}

func appendReflectionError(out []byte, code int, msg string) []byte {
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.VarintType)
	e = protowire.AppendVarint(e, uint64(code))
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendString(e, msg)
	out = protowire.AppendTag(out, respError, protowire.BytesType)
	return protowire.AppendBytes(out, e)
}

// serviceNames lists the services this server answers: the exported
// interfaces, health and reflection.
func (h *handler) serviceNames() []string {
	names := map[string]bool{healthService: true, reflectionV1: true, reflectionV1alpha: true}
	h.s.exporters.Each(func(_ string, e *exporter) { names[e.invoker.URL().Interface()] = true })
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
