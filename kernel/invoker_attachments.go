package kernel

import (
	"strconv"
	"time"
)

// InvokerAttachment is one parameter of a provider's URL that a consumer's
// invoker sends with every call, under the key Dubbo gives it, so that the
// provider's filters read the same attachments whatever the protocol:
// Dubbo's AbstractInvoker sends interface, group and token (the keys its
// DubboInvoker and TripleInvoker pass it), and DubboInvoker adds path,
// version and the method's timeout. Each protocol carries them its own way
// (Triple: path and interface in :path, group and version in its
// tri-service-* headers, the others as metadata), but every protocol's
// invoker reads this one table, so that a key added here reaches the
// provider over all of them.
type InvokerAttachment struct {
	Key string
	// PerMethod marks a value that depends on the method called; the
	// others are the same for every call of an invoker.
	PerMethod bool
	// Value is the attachment's value for a call of method on the provider
	// url describes; "" means the attachment is not sent.
	Value func(url *URL, method string) string
}

// InvokerAttachments is the table.
var InvokerAttachments = []InvokerAttachment{
	{Key: KeyPath, Value: func(u *URL, _ string) string { return u.Path }},
	{Key: KeyInterface, Value: func(u *URL, _ string) string { return u.Interface() }},
	{Key: KeyVersion, Value: urlParam(KeyVersion)},
	{Key: KeyGroup, Value: urlParam(KeyGroup)},
	// Dubbo's token: a provider that publishes one in its URL (which the
	// registry hands the consumer) wants it back with every call (the
	// token filter refuses the others).
	{Key: KeyToken, Value: urlParam(KeyToken)},
	// The time the consumer waits for the method, configured (not what is
	// left of it: that is the call's own countdown), in milliseconds.
	{Key: KeyTimeout, PerMethod: true, Value: func(u *URL, method string) string {
		return strconv.FormatInt(u.MethodTimeout(method, DefaultTimeoutMillis*time.Millisecond).Milliseconds(), 10)
	}},
}

func urlParam(k string) func(*URL, string) string {
	return func(u *URL, _ string) string { return u.Param(k) }
}
