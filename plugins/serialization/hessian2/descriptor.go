package hessian2

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/weftrpc/weft/kernel/view"
)

// Descriptor returns the JVM parameter descriptor that a Dubbo request carries
// for args ("Ljava/lang/String;J" for "a", int64(1)): Java providers pick the
// overload by it, so it must name the types the Java method declares, and it
// follows how each value is encoded. It matches dubbo-go's GetArgsTypeList
// except where that one is wrong:
//
//   - nil is Ljava/lang/Object; (dubbo-go sends V, which no parameter is);
//   - []time.Time is [Ljava/util/Date; (dubbo-go drops the ';');
//   - unsigned integers other than uint8 and uint16 are J, as the library
//     encodes them as longs (dubbo-go gives up);
//   - slices of structs are Ljava/util/List; (dubbo-go says Object[]; Java
//     reads the library's typed list into either);
//   - named types of a basic kind get their kind's descriptor (dubbo-go gives
//     up; note the library itself cannot encode most of them).
//
// As in dubbo-go: Param's JavaParamName and POJO's
// JavaClassName name their types, pointers to integers, floats, booleans and
// strings are the boxed types (Ljava/lang/Integer; for *int32), other structs
// are Ljava/lang/Object;, maps Ljava/util/Map;, and other slices
// Ljava/util/List;.
func Descriptor(args []any) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(argDescriptor(a))
	}
	return b.String()
}

func argDescriptor(v any) string {
	switch x := v.(type) {
	case nil:
		return "Ljava/lang/Object;"
	case string:
		return "Ljava/lang/String;"
	case int64, int, uint32, uint, uint64:
		return "J"
	case int32:
		return "I"
	case int16:
		return "S"
	case int8, uint8:
		return "B"
	case uint16:
		return "C"
	case bool:
		return "Z"
	case float64:
		return "D"
	case float32:
		return "F"
	case []byte, []int8:
		return "[B"
	case []string:
		return "[Ljava/lang/String;"
	case []bool:
		return "[Z"
	case []int16:
		return "[S"
	case []uint16:
		return "[C"
	case []int32:
		return "[I"
	case []int64, []int:
		return "[J"
	case []float32:
		return "[F"
	case []float64:
		return "[D"
	case []Object:
		return "[Ljava/lang/Object;"
	case []time.Time:
		return "[Ljava/util/Date;"
	case time.Time, *time.Time:
		return "Ljava/util/Date;"
	case *string:
		return "Ljava/lang/String;"
	case *bool:
		return "Ljava/lang/Boolean;"
	case *int8:
		return "Ljava/lang/Byte;"
	case *int16:
		return "Ljava/lang/Short;"
	case *uint16:
		return "Ljava/lang/Character;"
	case *int32:
		return "Ljava/lang/Integer;"
	case *int64, *int:
		return "Ljava/lang/Long;"
	case *float32:
		return "Ljava/lang/Float;"
	case *float64:
		return "Ljava/lang/Double;"
	case Param:
		return TypeDescriptor(x.JavaParamName())
	case POJO:
		return TypeDescriptor(x.JavaClassName())
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "Z"
	case reflect.Int8, reflect.Uint8:
		return "B"
	case reflect.Int16:
		return "S"
	case reflect.Uint16:
		return "C"
	case reflect.Int32:
		return "I"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "J"
	case reflect.Float32:
		return "F"
	case reflect.Float64:
		return "D"
	case reflect.String:
		return "Ljava/lang/String;"
	case reflect.Map:
		return "Ljava/util/Map;"
	case reflect.Slice, reflect.Array:
		if n, ok := listTypeName(t); ok && strings.HasSuffix(n, "[object") && !strings.HasPrefix(n, "[[") {
			return "[Ljava/lang/Object;" // dubbo-go's []hessian.Object, encoded as Object[]
		}
		return "Ljava/util/List;"
	case reflect.Struct:
		// A POJO passed by value whose JavaClassName has a pointer receiver.
		if p, ok := reflect.New(t).Interface().(POJO); ok {
			return TypeDescriptor(p.JavaClassName())
		}
	}
	return "Ljava/lang/Object;"
}

// javaPrimitives maps Java's primitive type names to their descriptors, for
// a JavaParamName that names one.
var javaPrimitives = map[string]string{
	"boolean": "Z", "byte": "B", "char": "C", "short": "S", "int": "I",
	"long": "J", "float": "F", "double": "D",
}

// TypeDescriptor turns a Java type name ("com.foo.User",
// "[Ljava.lang.String;", "int") into a descriptor.
func TypeDescriptor(name string) string {
	if d, ok := javaPrimitives[name]; ok {
		return d
	}
	if strings.HasPrefix(name, "[") {
		return strings.ReplaceAll(name, ".", "/")
	}
	if name == "" {
		return "Ljava/lang/Object;"
	}
	return "L" + strings.ReplaceAll(name, ".", "/") + ";"
}

// JavaName is TypeDescriptor's inverse for one parameter: "J" is "long",
// "Ljava/lang/String;" "java.lang.String", "[Ljava/lang/String;"
// "[Ljava.lang.String;" (the names Dubbo 3's Triple wrappers carry).
func JavaName(desc string) string {
	for name, d := range javaPrimitives {
		if d == desc {
			return name
		}
	}
	if strings.HasPrefix(desc, "[") {
		return strings.ReplaceAll(desc, "/", ".")
	}
	if strings.HasPrefix(desc, "L") && strings.HasSuffix(desc, ";") {
		return strings.ReplaceAll(desc[1:len(desc)-1], "/", ".")
	}
	return desc
}

// SplitDescriptor splits a parameter descriptor into one descriptor per
// parameter; a malformed tail is its own last piece.
func SplitDescriptor(desc string) []string {
	var out []string
	for i := 0; i < len(desc); {
		start := i
		for i < len(desc) && desc[i] == '[' {
			i++
		}
		switch {
		case i < len(desc) && desc[i] == 'L':
			if j := strings.IndexByte(desc[i:], ';'); j >= 0 {
				i += j + 1
			} else {
				i = len(desc)
			}
		case i < len(desc):
			i++
		}
		out = append(out, desc[start:i])
	}
	return out
}

// maxArrayDims is the JVM's limit on array dimensions.
const maxArrayDims = 255

// CountArgs returns how many parameters a JVM parameter descriptor lists, so a
// provider knows how many argument values follow it in a request. It accepts
// the grammar of JVM field descriptors, plus V, which dubbo-go sends for a nil
// argument, and rejects anything else with an error naming the offset.
//
// More than MaxArgs parameters is an error, as it is for the JVM: without the
// cap a descriptor of a million one-letter types makes the decoder allocate
// a million argument slots from a 1 MB frame.
func CountArgs(desc string) (int, error) {
	n := 0
	for i := 0; i < len(desc); n++ {
		if n == MaxArgs {
			return 0, fmt.Errorf("hessian2: descriptor %s: more than %d parameters (the JVM's limit)", quote(desc), MaxArgs)
		}
		start, dims := i, 0
		for i < len(desc) && desc[i] == '[' {
			i++
			dims++
		}
		if dims > maxArrayDims {
			return 0, fmt.Errorf("hessian2: descriptor %s: array of more than %d dimensions at offset %d", quote(desc), maxArrayDims, start)
		}
		if i == len(desc) {
			return 0, fmt.Errorf("hessian2: descriptor %s ends inside an array type", quote(desc))
		}
		switch c := desc[i]; c {
		case 'Z', 'B', 'C', 'S', 'I', 'J', 'F', 'D':
			i++
		case 'V':
			if dims > 0 {
				return 0, fmt.Errorf("hessian2: descriptor %s: array of void at offset %d", quote(desc), start)
			}
			i++
		case 'L':
			end := strings.IndexByte(desc[i+1:], ';')
			if end < 0 {
				return 0, fmt.Errorf("hessian2: descriptor %s: class type at offset %d has no ';'", quote(desc), i)
			}
			if err := checkClassName(desc[i+1 : i+1+end]); err != nil {
				return 0, fmt.Errorf("hessian2: descriptor %s: class type at offset %d: %w", quote(desc), i, err)
			}
			i += end + 2
		default:
			return 0, fmt.Errorf("hessian2: descriptor %s: unexpected %q at offset %d", quote(desc), c, i)
		}
	}
	return n, nil
}

// MaxArgs is the most parameters a method may have: the JVM's limit.
const MaxArgs = 255

// maxQuoted bounds the input an error quotes: a caller once received an
// 8.3-million-character error string quoting its own descriptor.
const maxQuoted = 200

// quote quotes hostile input for an error, cut to maxQuoted bytes.
func quote(s string) string { return strconv.Quote(view.Cut(s, maxQuoted)) }

// checkClassName checks a binary class name in internal form
// ("java/lang/String"): '/'-separated, non-empty parts without '.' or '['.
func checkClassName(name string) error {
	if name == "" {
		return errors.New("empty class name")
	}
	for part := range strings.SplitSeq(name, "/") {
		if part == "" {
			return fmt.Errorf("empty part in class name %s", quote(name))
		}
		if strings.ContainsAny(part, ".[") {
			return fmt.Errorf("invalid character in class name %s", quote(name))
		}
	}
	return nil
}
