package engine

import (
	"sync"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// serializations is extension.Serializations over the App's Loader: the
// protocols find a reference's `serialization` by name there, and a peer's
// frame's by its id among every serialization the App has.
type serializations struct {
	l *kernel.Loader[extension.Serialization]

	once sync.Once
	byID map[byte]extension.Serialization
}

var _ extension.Serializations = (*serializations)(nil)

// NewSerializations is extension.Serializations over l.
func NewSerializations(l *kernel.Loader[extension.Serialization]) extension.Serializations {
	return &serializations{l: l}
}

func (s *serializations) Serialization(name string) (extension.Serialization, error) {
	return s.l.Get(name)
}

func (s *serializations) ByID(id byte) (extension.Serialization, bool) {
	s.once.Do(func() {
		s.byID = map[byte]extension.Serialization{}
		for _, n := range s.l.Names() {
			// Those that fail to build were reported by name already
			// (Get at the key that chose them); no frame finds them.
			if ser, err := s.l.Get(n); err == nil {
				s.byID[ser.ID()] = ser
			}
		}
	})
	ser, ok := s.byID[id]
	return ser, ok
}
