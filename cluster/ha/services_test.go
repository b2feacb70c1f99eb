package ha

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// This test binary links no implementation: Open refuses, naming the key
// that asked for HA and the import that links it, as database/sql names
// a driver that is not linked.
func TestOpenWithoutTheEtcdPackage(t *testing.T) {
	if Linked("etcd") {
		t.Fatal("the etcd services are linked into package ha's tests: the test could not fail")
	}
	s, err := Open(context.Background(), Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if !errors.Is(err, ErrNotLinked) || s != nil {
		t.Fatalf("Open without cluster/ha/etcd = %v, %v; want ErrNotLinked", s, err)
	}
	for _, want := range []string{KeyEndpoints.Name(), `import _ "github.com/sluicehq/sluice/cluster/ha/etcd"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
}

// A registered type opens; registering it twice is a programming error.
func TestRegisterType(t *testing.T) {
	const typ = "test-registry"
	var got Config
	RegisterType(typ, func(_ context.Context, cfg Config) (Services, error) {
		got = cfg
		return nil, errors.New("opened")
	})
	if !Linked(typ) || Linked("zookeeper") {
		t.Fatalf("Linked(%s) = %t, Linked(zookeeper) = %t", typ, Linked(typ), Linked("zookeeper"))
	}
	typesMu.RLock()
	_, err := types[typ](context.Background(), Config{Prefix: "/p"})
	typesMu.RUnlock()
	if err == nil || got.Prefix != "/p" {
		t.Fatalf("the registered opener was not the one called: %v, %+v", err, got)
	}
	defer func() {
		if recover() == nil {
			t.Error("RegisterType twice did not panic")
		}
	}()
	RegisterType(typ, nil)
}
