package registry

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Dubbo 3's keys of application-level service discovery.
const (
	// KeyRegistryType on a registry's address URL: "service" makes it an
	// application-level registry only (Dubbo's registry-type=service).
	KeyRegistryType     = "registry-type"
	RegistryTypeService = "service"
	// KeyProvidedBy on a reference names the applications that provide
	// its interface, instead of the mapping (Dubbo's provided-by).
	KeyProvidedBy = "provided-by"
	// KeyMigrationStep on a reference overrides the App's migration step.
	KeyMigrationStep = "migration.step"

	keyProtocol = "protocol"

	// Instance metadata.
	MetaRevision    = "dubbo.metadata.revision"
	MetaStorageType = "dubbo.metadata.storage-type"
	MetaEndpoints   = "dubbo.endpoints"
	MetaServiceURL  = "dubbo.metadata-service.url-params"
	// MetaVersion is dubbo-go's MetadataService version key (meta-v):
	// 1.0.0 is the hessian2 MetadataService weft serves.
	MetaVersion = "meta-v"
	// StorageLocal: consumers read an instance's metadata from its own
	// MetadataService (Dubbo's default), not from a metadata report.
	StorageLocal = "local"

	// MetadataServiceName is the interface of the service every Dubbo 3
	// provider in instance mode exports, group = its application, version
	// MetadataServiceVersion.
	MetadataServiceName    = "org.apache.dubbo.metadata.MetadataService"
	MetadataServiceVersion = "1.0.0"
	// MappingGroup is the group of the interface → application mapping
	// documents (Dubbo's "mapping").
	MappingGroup = "mapping"
)

// Register modes: how a provider registers (Dubbo's register-mode).
const (
	RegisterInterface = "interface"
	RegisterInstance  = "instance"
	RegisterAll       = "all"
	// DefaultRegisterMode is Dubbo 3's: both, so that Dubbo 2 consumers
	// (interface level) and Dubbo 3 ones (application level) find it.
	DefaultRegisterMode = RegisterAll
)

// Migration steps: where a consumer looks (Dubbo's migration step).
const (
	ForceInterface   = "FORCE_INTERFACE"
	ApplicationFirst = "APPLICATION_FIRST"
	ForceApplication = "FORCE_APPLICATION"
	// DefaultMigrationStep is Dubbo 3's: application-level providers when
	// there are any, else interface-level ones.
	DefaultMigrationStep = ApplicationFirst
)

// MetadataInfo is what an instance's MetadataService answers for a
// revision: the application's services (Java's
// org.apache.dubbo.metadata.MetadataInfo, the same fields by the same
// names, so Java and dubbo-go read it and weft reads theirs).
//
// The fields are dubbo-go's, in dubbo-go's order, tag included (Java has
// no tag and skips it): the hessian2 library keeps one class definition
// per Java class name for the whole process, so in a process that also
// links dubbo-go (which registers its own MetadataInfo) weft's values are
// written under dubbo-go's field list, and must line up with it.
type MetadataInfo struct {
	App      string                  `hessian:"app"`
	Revision string                  `hessian:"revision"`
	Tag      string                  `hessian:"tag"`
	Services map[string]*ServiceInfo `hessian:"services"`
}

// JavaClassName is Java's class of the value.
func (*MetadataInfo) JavaClassName() string { return "org.apache.dubbo.metadata.MetadataInfo" }

// ServiceInfo is one service of a MetadataInfo (Java's
// MetadataInfo$ServiceInfo): its key and the parameters a consumer puts on
// the provider URL it builds. The fields are Java's and dubbo-go's, in
// their order (see MetadataInfo).
type ServiceInfo struct {
	Name     string            `hessian:"name"`
	Group    string            `hessian:"group"`
	Version  string            `hessian:"version"`
	Protocol string            `hessian:"protocol"`
	Port     int32             `hessian:"port"`
	Path     string            `hessian:"path"`
	Params   map[string]string `hessian:"params"`
}

// JavaClassName is Java's class of the value.
func (*ServiceInfo) JavaClassName() string {
	return "org.apache.dubbo.metadata.MetadataInfo$ServiceInfo"
}

// MatchKey is Dubbo's key of a service in MetadataInfo.Services:
// [group/]interface[:version]:protocol.
func (s *ServiceInfo) MatchKey() string {
	return serviceKey(s.Name, s.Group, s.Version) + ":" + s.Protocol
}

func serviceKey(iface, group, version string) string {
	k := iface
	if group != "" {
		k = group + "/" + k
	}
	if version != "" && version != "0.0.0" {
		k += ":" + version
	}
	return k
}

// volatileParamNames are left out of a ServiceInfo: they change at every start
// and would change the revision with them.
var volatileParamNames = []string{kernel.KeyTimestamp, "pid", extension.KeyCategory, KeyRegister}

// isVolatile reports whether k is one of volatileParamNames.
func isVolatile(k string) bool {
	return slices.Contains(volatileParamNames, k)
}

// serviceInfo describes an exported URL for the metadata.
func serviceInfo(u *kernel.URL) *ServiceInfo {
	params := map[string]string{}
	for k, v := range u.Params() {
		if !isVolatile(k) {
			params[k] = v
		}
	}
	return &ServiceInfo{
		Name: u.Interface(), Group: u.Param(kernel.KeyGroup), Version: u.Param(kernel.KeyVersion),
		Protocol: u.Protocol, Port: int32(u.Port), Path: u.Path, Params: params,
	}
}

// revision is a digest of the application's services: equal services,
// equal revision, whichever instance computes it, so consumers fetch the
// metadata once per revision, not once per instance.
func revision(app string, services map[string]*ServiceInfo) string {
	if len(services) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(services))
	for k := range services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := md5.New()
	h.Write([]byte(app))
	for _, k := range keys {
		s := services[k]
		fmt.Fprintf(h, "\x00%s\x00%s", k, s.Path)
		pk := make([]string, 0, len(s.Params))
		for p := range s.Params {
			pk = append(pk, p)
		}
		sort.Strings(pk)
		for _, p := range pk {
			fmt.Fprintf(h, "\x00%s=%s", p, s.Params[p])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// endpoint is one entry of dubbo.endpoints.
type endpoint struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}

// Bounds on what a consumer accepts from an instance's metadata and its
// MetadataService: both come from the network.
const (
	maxMetaValue   = 64 << 10
	maxEndpoints   = 64
	maxServices    = 4096
	maxParams      = 1024
	maxParamLength = 16 << 10
)

// endpoints reads an instance's dubbo.endpoints (protocol → port); nil when
// absent or malformed (the instance's own port serves every protocol).
func endpoints(meta map[string]string) map[string]int {
	raw := meta[MetaEndpoints]
	if raw == "" || len(raw) > maxMetaValue {
		return nil
	}
	var eps []endpoint
	if err := json.Unmarshal([]byte(raw), &eps); err != nil || len(eps) > maxEndpoints {
		return nil
	}
	out := map[string]int{}
	for _, e := range eps {
		if e.Protocol != "" && e.Port > 0 && e.Port < 65536 {
			out[e.Protocol] = e.Port
		}
	}
	return out
}

// metadataServiceURL is the URL of an instance's MetadataService, from its
// dubbo.metadata-service.url-params (Java and dubbo-go write a flat JSON
// object with protocol and port among the URL's parameters).
func metadataServiceURL(in extension.ServiceInstance) (*kernel.URL, error) {
	raw := in.Metadata[MetaServiceURL]
	if raw == "" {
		return nil, fmt.Errorf("instance %s of %s has no %s: it serves no MetadataService weft can call", in.ID(), in.App, MetaServiceURL)
	}
	if len(raw) > maxMetaValue {
		return nil, fmt.Errorf("instance %s of %s: %s of %d bytes is over the %d-byte limit", in.ID(), in.App, MetaServiceURL, len(raw), maxMetaValue)
	}
	var ps map[string]string
	if err := json.Unmarshal([]byte(raw), &ps); err != nil {
		// Dubbo 2.7 and 3.0 nested the parameters by protocol:
		// {"dubbo":{"port":"20880",...}}.
		var nested map[string]map[string]string
		if err2 := json.Unmarshal([]byte(raw), &nested); err2 != nil || len(nested) == 0 {
			return nil, fmt.Errorf("instance %s of %s: %s is not a JSON object of strings: %v", in.ID(), in.App, MetaServiceURL, err)
		}
		for proto, p := range nested {
			ps = p
			if ps[keyProtocol] == "" {
				ps[keyProtocol] = proto
			}
			break
		}
	}
	proto := ps[keyProtocol]
	if proto == "" {
		proto = "dubbo"
	}
	port, err := strconv.Atoi(ps["port"])
	if err != nil || port <= 0 || port >= 65536 {
		port = in.Port
	}
	params := map[string]string{}
	for k, v := range ps {
		if k != "port" && k != keyProtocol && len(params) < maxParams {
			params[k] = v
		}
	}
	params[kernel.KeyInterface] = MetadataServiceName
	params[kernel.KeyGroup] = in.App
	if params[kernel.KeyVersion] == "" {
		params[kernel.KeyVersion] = MetadataServiceVersion
	}
	params[kernel.KeySide] = kernel.SideConsumer
	return kernel.NewURL(proto, in.Host, port, MetadataServiceName, params), nil
}

// providerURLs are the provider URLs an instance offers for the services of
// its metadata that match consumer (interface, group, version; the
// protocols it takes, if it names them): the instance's host, the port of
// the service's protocol, the service's parameters.
func providerURLs(in extension.ServiceInstance, md *MetadataInfo, consumer *kernel.URL, protocols []string) []*kernel.URL {
	eps := endpoints(in.Metadata)
	var out []*kernel.URL
	for _, s := range md.Services {
		if s == nil || s.Name != consumer.Interface() || !groupMatches(consumer.Param(kernel.KeyGroup), s.Group) ||
			!versionMatches(consumer.Param(kernel.KeyVersion), s.Version) {
			continue
		}
		if len(protocols) > 0 && !contains(protocols, s.Protocol) {
			continue
		}
		// The endpoint's port, not the service's: instances of one
		// revision share one metadata, fetched from one of them, and
		// each listens on its own port.
		port := in.Port
		if p, ok := eps[s.Protocol]; ok {
			port = p
		}
		params := make(map[string]string, len(s.Params)+4)
		for k, v := range s.Params {
			if len(params) < maxParams && len(v) <= maxParamLength {
				params[k] = v
			}
		}
		params[kernel.KeyInterface] = s.Name
		set := func(k, v string) {
			if v != "" {
				params[k] = v
			}
		}
		set(kernel.KeyGroup, s.Group)
		set(kernel.KeyVersion, s.Version)
		params[kernel.KeySide] = kernel.SideProvider
		path := s.Path
		if path == "" {
			path = s.Name
		}
		out = append(out, kernel.NewURL(s.Protocol, in.Host, port, strings.TrimPrefix(path, "/"), params))
	}
	return out
}

// groupMatches is Dubbo's: a consumer's group "*" takes any, a list takes
// its members, otherwise equal (empty equals empty).
func groupMatches(want, have string) bool {
	if want == "*" {
		return true
	}
	if strings.Contains(want, ",") {
		return contains(strings.Split(want, ","), have)
	}
	return want == have
}

func versionMatches(want, have string) bool {
	return want == "*" || want == have || (want == "" && have == "0.0.0") || (want == "0.0.0" && have == "")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// checkMetadata bounds what a MetadataService answered.
func checkMetadata(md *MetadataInfo, app, rev string) error {
	switch {
	case md == nil:
		return fmt.Errorf("no metadata for revision %s of %s", clip(rev), app)
	case len(md.Services) > maxServices:
		return fmt.Errorf("metadata of %s lists %d services, over the limit of %d", app, len(md.Services), maxServices)
	}
	for _, s := range md.Services {
		if s != nil && len(s.Params) > maxParams {
			return fmt.Errorf("metadata of %s: service %s has %d parameters, over the limit of %d", app, clip(s.Name), len(s.Params), maxParams)
		}
	}
	return nil
}

// clip bounds a string from the network before it goes into a message.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "..."
	}
	return s
}
