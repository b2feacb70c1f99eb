package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The data and the endpoints survive a restart; a stopped server does
// not answer.
func TestRestartKeepsData(t *testing.T) {
	s := StartServer(t)
	eps := s.Endpoints()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}

	s.Stop()
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("a stopped server answered")
	}

	s.Restart()
	if got := s.Endpoints(); len(got) != 1 || got[0] != eps[0] {
		t.Fatalf("endpoints after restart %v, before %v", got, eps)
	}
	resp, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart k = %v, want v", resp.Kvs)
	}
}
