package test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// zkRegistry is a ZooKeeper registry address with roots of the test's own
// (interface level and the mapping under /<g>, the instances under
// /<g>/services), so that runs on a long-lived server never see each
// other. Without ZOOKEEPER_TEST_ADDR the test fails under CI and is skipped
// elsewhere.
func zkRegistry(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ZOOKEEPER_TEST_ADDR")
	if addr == "" {
		msg := "ZOOKEEPER_TEST_ADDR is not set: start ZooKeeper with `test/zookeeper/zk.sh start /tmp/zk` and set ZOOKEEPER_TEST_ADDR=127.0.0.1:2181"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	g := fmt.Sprintf("weft-e2e-%d", time.Now().UnixNano())
	return "zookeeper://" + addr + "?group=" + g + "&rootPath=/" + g + "/services"
}

// The application-level matrix and the revision checks of
// discovery_e2e_test.go, over ZooKeeper: instances as Curator nodes, the
// mapping as /<group>/mapping/<interface>.
func TestZookeeperDiscoveryModesAndMigrationSteps(t *testing.T) {
	zkRegistry(t) // skip early
	noLeaks(t)
	discoveryModes(t, zkRegistry, 10*time.Second, weft.WithPlugins(zookeeper.Plugin()))
}

func TestZookeeperDiscoveryFollowsRevisionsAndProvidedBy(t *testing.T) {
	reg := zkRegistry(t)
	noLeaks(t)
	discoveryRevisions(t, reg, 10*time.Second, 15*time.Second, weft.WithPlugins(zookeeper.Plugin()))
}
