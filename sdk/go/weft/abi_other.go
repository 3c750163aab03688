//go:build !wasip1

package weft

// Outside a wasm filter there is no host: these stand-ins let the package
// compile natively (go vet, unit tests of a filter's pure logic) and panic if
// called.

func noHost() int32 { panic("weft: host functions exist only in a wasm filter (GOOS=wasip1)") }

func hostGetService(_, _ *uint32) int32                   { return noHost() }
func hostGetMethod(_, _ *uint32) int32                    { return noHost() }
func hostGetSide(_, _ *uint32) int32                      { return noHost() }
func hostGetArguments(_, _ *uint32) int32                 { return noHost() }
func hostGetRemoteAddress(_, _ *uint32) int32             { return noHost() }
func hostGetAttachment(_ string, _, _ *uint32) int32      { return noHost() }
func hostSetAttachment(_, _ string) int32                 { return noHost() }
func hostRemoveAttachment(_ string) int32                 { return noHost() }
func hostGetConfig(_, _ *uint32) int32                    { return noHost() }
func hostGetResult(_, _ *uint32) int32                    { return noHost() }
func hostGetError(_, _ *uint32) int32                     { return noHost() }
func hostReject(_ int32, _ string) int32                  { return noHost() }
func hostLog(_ int32, _ string) int32                     { return noHost() }
func hostCounterAdd(_ string, _, _ int64) int64           { return int64(noHost()) }
func hostNowMs() int64                                    { return int64(noHost()) }
func hostSharedGet(_ string, _, _, _ *uint32) int32       { return noHost() }
func hostSharedSet(_, _ string, _ uint32) int32           { return noHost() }
func hostMetricDefine(_ int32, _ string, _ *uint32) int32 { return noHost() }
func hostMetricAdd(_ uint32, _ int64) int32               { return noHost() }
func hostMetricRecord(_ uint32, _ int64) int32            { return noHost() }
func hostSetTickPeriod(_ uint32) int32                    { return noHost() }
func hostHTTPCall(_, _, _, _, _ string, _ uint32, _, _, _, _, _ *uint32) int32 {
	return noHost()
}
func hostQueueRegister(_ string, _ *uint32) int32        { return noHost() }
func hostQueueResolve(_, _ string, _ *uint32) int32      { return noHost() }
func hostQueueEnqueue(_ uint32, _ string) int32          { return noHost() }
func hostQueueDequeue(_ uint32, _, _ *uint32) int32      { return noHost() }
func hostGetProperty(_ string, _, _ *uint32) int32       { return noHost() }
func hostSetResult(_ string) int32                       { return noHost() }
func hostGetDeadline() int64                             { return int64(noHost()) }
func hostGetArgumentString(_ uint32, _, _ *uint32) int32 { return noHost() }
func hostSetResultString(_ string) int32                 { return noHost() }
