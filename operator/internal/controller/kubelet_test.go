package controller

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubelet plays the parts of a cluster that envtest has not: the
// Deployment and StatefulSet controllers, the kubelet, kube-proxy and DNS.
// For each replica the operator's objects ask for it runs the container's
// process as an OS process on a loopback address of its own (the pod's
// IP, 127.0.x.y), with the container's variables resolved as the kubelet
// does ($(VAR), fieldRef, configMapKeyRef, secretKeyRef) and its volumes
// as directories; it writes each pod to the API server (running, with
// its IP) and deletes it once its process is gone, probes /readyz (HTTPS
// when the probe says so, unverified as the kubelet's) and writes the
// controllers' status back (replicas counts every live process, a
// terminating one too). Each
// Service gets an address of its own (127.1.0.N) where a TCP proxy
// forwards to a pod its selector picks; "<svc>.<ns>.svc" in a process's
// variables and arguments is that address.
type kubelet struct {
	t      *testing.T
	c      client.Client
	ns     string            // the namespace it runs the pods of
	images map[string]string // image -> the binary it runs
	dir    string

	mu       sync.Mutex
	pods     map[string]*pod // by pod name
	services map[string]*service
	// overlap is set when processes of two pod templates of one job
	// (two versions) ever lived at once, with what they were.
	overlap string
	// maxCoordinators is the most coordinator processes alive at once.
	maxCoordinators int
	// paused stops the syncing: the processes run on, nothing starts or
	// stops, no status is written.
	paused atomic.Bool
}

// podAddresses and serviceAddresses number the loopback addresses the
// kubelets give out, one of each per pod and Service of every test: the
// tests run in parallel.
var podAddresses, serviceAddresses atomic.Int32

type pod struct {
	name, ns, owner, component string
	template                   string // hash of the pod template
	version                    string // the operator's spec hash: one per version of the job
	spec                       corev1.PodSpec
	labels                     map[string]string
	ip                         string
	dir                        string
	cmd                        *exec.Cmd
	done                       chan struct{}
	ready                      bool
	terminating                bool
	restarts                   int
	lastExit                   time.Time
}

type service struct {
	name, ns string
	ip       string
	selector map[string]string
	notReady bool
	ports    map[int32]string // port -> target port name
	lns      []net.Listener
}

func newKubelet(t *testing.T, c client.Client, ns string, images map[string]string) *kubelet {
	return &kubelet{t: t, c: c, ns: ns, images: images, dir: t.TempDir(), pods: map[string]*pod{}, services: map[string]*service{}}
}

// run syncs every 200 ms until ctx ends, then stops every process.
func (k *kubelet) run(ctx context.Context) {
	defer k.stopAll()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if k.paused.Load() {
			k.checkVersions()
		} else if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			k.t.Logf("kubelet: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func templateHash(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:5])
}

func (k *kubelet) sync(ctx context.Context) error {
	var svcs corev1.ServiceList
	if err := k.c.List(ctx, &svcs, client.InNamespace(k.ns), client.MatchingLabels{LabelManagedBy: managedBy}); err != nil {
		return err
	}
	for i := range svcs.Items {
		k.ensureService(&svcs.Items[i])
	}
	var deps appsv1.DeploymentList
	if err := k.c.List(ctx, &deps, client.InNamespace(k.ns), client.MatchingLabels{LabelManagedBy: managedBy}); err != nil {
		return err
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if err := k.syncDeployment(ctx, d); err != nil {
			return err
		}
	}
	var stss appsv1.StatefulSetList
	if err := k.c.List(ctx, &stss, client.InNamespace(k.ns), client.MatchingLabels{LabelManagedBy: managedBy}); err != nil {
		return err
	}
	for i := range stss.Items {
		if err := k.syncStatefulSet(ctx, &stss.Items[i]); err != nil {
			return err
		}
	}
	k.probe()
	k.checkVersions()
	return nil
}

// syncDeployment: Recreate — every old pod gone before a new one starts.
func (k *kubelet) syncDeployment(ctx context.Context, d *appsv1.Deployment) error {
	want := int(ptrOr(d.Spec.Replicas, 1))
	hash := templateHash(d.Spec.Template)
	owned := k.owned(d.Namespace, "Deployment/"+d.Name)
	old := false
	for _, p := range owned {
		if p.template != hash {
			old = true
			k.terminate(p)
		}
	}
	if !old {
		live := 0
		for _, p := range owned {
			if !k.terminating(p) {
				live++
			}
		}
		for i := 0; live < want; i++ {
			name := fmt.Sprintf("%s-%s-%d", d.Name, hash[:6], i)
			if k.podByName(name) == nil {
				k.start(d.Namespace, "Deployment/"+d.Name, name, hash, d.Spec.Template)
				live++
			}
		}
		for _, p := range owned {
			if !k.terminating(p) && live > want {
				k.terminate(p)
				live--
			}
		}
	}
	return k.writeStatus(ctx, d, d.Namespace, "Deployment/"+d.Name, hash)
}

// syncStatefulSet: ordinals 0..replicas-1, created at once (Parallel);
// pods of an older template replaced one at a time (RollingUpdate).
func (k *kubelet) syncStatefulSet(ctx context.Context, s *appsv1.StatefulSet) error {
	want := int(ptrOr(s.Spec.Replicas, 1))
	hash := templateHash(s.Spec.Template)
	owner := "StatefulSet/" + s.Name
	// RollingUpdate: beyond the replicas, pods go at once; of the pods of
	// an older template, the highest ordinal is replaced first, the next
	// only once every pod of the new template is ready.
	settled := true
	var oldest *pod
	oldOrd := -1
	for _, p := range k.owned(s.Namespace, owner) {
		ord, _ := strconv.Atoi(p.name[strings.LastIndexByte(p.name, '-')+1:])
		switch {
		case ord >= want:
			k.terminate(p)
		case p.template != hash:
			if ord > oldOrd {
				oldest, oldOrd = p, ord
			}
		default:
			k.mu.Lock()
			settled = settled && p.ready && !p.terminating
			k.mu.Unlock()
		}
	}
	if oldest != nil && settled {
		k.terminate(oldest)
	}
	for i := range want {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		if k.podByName(name) == nil {
			k.start(s.Namespace, owner, name, hash, s.Spec.Template)
		}
	}
	return k.writeStatus(ctx, s, s.Namespace, owner, hash)
}

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

func (k *kubelet) owned(ns, owner string) []*pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*pod
	for _, p := range k.pods {
		if p.ns == ns && p.owner == owner {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (k *kubelet) terminating(p *pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return p.terminating
}

func (k *kubelet) podByName(name string) *pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[name]
}

// writeStatus reports the controller's pods: replicas counts every live
// process (terminating too), ready the ready ones of the current template.
func (k *kubelet) writeStatus(ctx context.Context, obj client.Object, ns, owner, hash string) error {
	var replicas, ready, updated int32
	pods := k.owned(ns, owner)
	k.mu.Lock()
	for _, p := range pods {
		replicas++
		if p.template == hash && !p.terminating {
			updated++
			if p.ready {
				ready++
			}
		}
	}
	k.mu.Unlock()
	for range 5 {
		var err error
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Status.ObservedGeneration, o.Status.Replicas, o.Status.ReadyReplicas = o.Generation, replicas, ready
			o.Status.UpdatedReplicas, o.Status.AvailableReplicas = updated, ready
			err = k.c.Status().Update(ctx, o)
		case *appsv1.StatefulSet:
			o.Status.ObservedGeneration, o.Status.Replicas, o.Status.ReadyReplicas = o.Generation, replicas, ready
			o.Status.UpdatedReplicas, o.Status.AvailableReplicas, o.Status.CurrentReplicas = updated, ready, updated
			err = k.c.Status().Update(ctx, o)
		}
		if !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return nil
}

// start runs a pod's container as a process (restarted when it exits,
// as restartPolicy Always does).
func (k *kubelet) start(ns, owner, name, hash string, tmpl corev1.PodTemplateSpec) {
	k.mu.Lock()
	n := int(podAddresses.Add(1))
	p := &pod{name: name, ns: ns, owner: owner, template: hash, version: tmpl.Annotations[AnnotationSpecHash], spec: tmpl.Spec, labels: tmpl.Labels,
		component: tmpl.Labels[LabelComponent], ip: fmt.Sprintf("127.0.%d.%d", 10+n/200, 1+n%200),
		dir: filepath.Join(k.dir, name+"-"+strconv.Itoa(n)), done: make(chan struct{})}
	// A process of another version of the job still alive (terminating
	// too) while this one starts: two versions at once.
	for _, o := range k.pods {
		if o.ns == ns && o.labels[LabelInstance] == p.labels[LabelInstance] && o.version != p.version && k.overlap == "" {
			k.overlap = fmt.Sprintf("%s started (version %s) while %s (version %s) was alive", name, p.version, o.name, o.version)
		}
	}
	k.pods[name] = p
	k.mu.Unlock()
	k.createPod(p, tmpl)
	k.launch(p)
}

// createPod writes the pod to the API server, running on its IP, as the
// scheduler and the kubelet would: the operator finds a job's leading
// coordinator among them, and waits for none to be left while it drains.
func (k *kubelet) createPod(p *pod, tmpl corev1.PodTemplateSpec) {
	ctx := context.Background()
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec: tmpl.Spec}
	if err := k.c.Create(ctx, obj); err != nil {
		k.t.Logf("kubelet: create pod %s: %v", p.name, err)
		return
	}
	obj.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}}, HostIP: "127.0.0.1"}
	if err := k.c.Status().Update(ctx, obj); err != nil {
		k.t.Logf("kubelet: pod %s status: %v", p.name, err)
	}
}

// launch starts the pod's process; p.done is already the channel its
// end closes (set under the lock with the check that it is not
// terminating, so that terminate waits for this process).
func (k *kubelet) launch(p *pod) {
	cmd, err := k.command(p)
	k.mu.Lock()
	done := p.done
	k.mu.Unlock()
	if err != nil {
		k.t.Logf("kubelet: pod %s: %v", p.name, err)
		close(done)
		go k.restartLater(p)
		return
	}
	if err := cmd.Start(); err != nil {
		k.t.Logf("kubelet: pod %s: start: %v", p.name, err)
		close(done)
		go k.restartLater(p)
		return
	}
	k.mu.Lock()
	p.cmd = cmd
	term := p.terminating
	k.mu.Unlock()
	if term {
		// Terminated while it was starting: it stops at once.
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	go func() {
		err := cmd.Wait()
		k.mu.Lock()
		p.ready, p.lastExit = false, time.Now()
		term := p.terminating
		k.mu.Unlock()
		if !term {
			k.t.Logf("kubelet: pod %s exited: %v (restarting)", p.name, err)
		}
		close(done)
		if !term {
			k.restartLater(p)
		}
	}()
}

func (k *kubelet) restartLater(p *pod) {
	time.Sleep(time.Second)
	k.mu.Lock()
	term := p.terminating
	p.restarts++
	if !term {
		p.done, p.ready = make(chan struct{}), false
	}
	k.mu.Unlock()
	if !term {
		k.launch(p)
	} else {
		k.remove(p)
	}
}

// terminate sends SIGTERM (SIGKILL after the grace period) and forgets
// the pod once its process exited.
func (k *kubelet) terminate(p *pod) {
	k.mu.Lock()
	if p.terminating {
		k.mu.Unlock()
		return
	}
	p.terminating, p.ready = true, false
	cmd, done := p.cmd, p.done
	k.mu.Unlock()
	go func() {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		k.remove(p)
	}()
}

// kill SIGKILLs a pod's process, as a crash: it is restarted (a
// container's restart, the pod stays).
func (k *kubelet) kill(name string) {
	k.mu.Lock()
	p := k.pods[name]
	var cmd *exec.Cmd
	if p != nil {
		cmd = p.cmd
	}
	k.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		k.t.Fatalf("kubelet: no process of pod %s to kill", name)
	}
	_ = cmd.Process.Kill()
}

func (k *kubelet) remove(p *pod) {
	// The pod object goes first: one of the same name (a StatefulSet's)
	// starts only once this one is out of k.pods.
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}}
	if err := k.c.Delete(context.Background(), obj, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		k.t.Logf("kubelet: delete pod %s: %v", p.name, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pods[p.name] == p {
		delete(k.pods, p.name)
	}
}

func (k *kubelet) stopAll() {
	k.mu.Lock()
	var all []*pod
	for _, p := range k.pods {
		all = append(all, p)
	}
	for _, s := range k.services {
		for _, ln := range s.lns {
			ln.Close()
		}
	}
	k.mu.Unlock()
	for _, p := range all {
		k.terminate(p)
	}
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		k.mu.Lock()
		n := len(k.pods)
		k.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command is the pod's container as a process: the image's binary, the
// arguments and variables resolved, the volumes as directories.
func (k *kubelet) command(p *pod) (*exec.Cmd, error) {
	ctx := context.Background()
	c := p.spec.Containers[0]
	bin, ok := k.images[c.Image]
	if !ok {
		return nil, fmt.Errorf("image %q: ErrImagePull (the test knows %v)", c.Image, k.images)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	// Volumes.
	mounts := map[string]string{}
	for _, v := range p.spec.Volumes {
		d := filepath.Join(p.dir, "volumes", v.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if v.Secret != nil {
			var s corev1.Secret
			if err := k.c.Get(ctx, types.NamespacedName{Namespace: p.ns, Name: v.Secret.SecretName}, &s); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			for key, val := range s.Data {
				if err := os.WriteFile(filepath.Join(d, key), val, 0o600); err != nil {
					return nil, err
				}
			}
		}
		mounts[v.Name] = d
	}
	// A mount path in a variable or an argument is the volume's
	// directory; one that the test's own paths start with (/tmp) is left
	// alone: the processes share the machine's.
	var pathRepl []string
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(k.dir, m.MountPath) {
			pathRepl = append(pathRepl, m.MountPath, mounts[m.Name])
		}
	}
	rewrite := strings.NewReplacer(append(pathRepl, k.dnsNames()...)...)
	// Variables, in order, each seeing the ones before.
	vars := map[string]string{}
	var env []string
	// $(VAR) of a variable defined before, as the kubelet expands it; an
	// unknown one stays as it is.
	expand := func(s string) string {
		var b strings.Builder
		for {
			i := strings.Index(s, "$(")
			j := strings.IndexByte(s[max(i, 0):], ')')
			if i < 0 || j < 0 {
				b.WriteString(s)
				break
			}
			j += i
			b.WriteString(s[:i])
			if v, ok := vars[s[i+2:j]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : j+1])
			}
			s = s[j+1:]
		}
		return rewrite.Replace(b.String())
	}
	for _, e := range c.Env {
		val := e.Value
		if e.Value != "" {
			val = expand(e.Value)
		}
		if f := e.ValueFrom; f != nil {
			var err error
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "status.podIP":
				val = p.ip
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				val = p.name
			case f.ConfigMapKeyRef != nil:
				var cm corev1.ConfigMap
				if err = k.c.Get(ctx, types.NamespacedName{Namespace: p.ns, Name: f.ConfigMapKeyRef.Name}, &cm); err == nil {
					v, ok := cm.Data[f.ConfigMapKeyRef.Key]
					if !ok && (f.ConfigMapKeyRef.Optional == nil || !*f.ConfigMapKeyRef.Optional) {
						err = fmt.Errorf("ConfigMap %s has no key %s", f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Key)
					}
					val = rewrite.Replace(v)
				}
			case f.SecretKeyRef != nil:
				var s corev1.Secret
				if err = k.c.Get(ctx, types.NamespacedName{Namespace: p.ns, Name: f.SecretKeyRef.Name}, &s); err == nil {
					v, ok := s.Data[f.SecretKeyRef.Key]
					if !ok && (f.SecretKeyRef.Optional == nil || !*f.SecretKeyRef.Optional) {
						err = fmt.Errorf("Secret %s has no key %s", f.SecretKeyRef.Name, f.SecretKeyRef.Key)
					}
					val = string(v)
				} else if apierrors.IsNotFound(err) && f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional {
					err = nil
					continue
				}
			default:
				err = fmt.Errorf("variable %s: a valueFrom the test does not resolve", e.Name)
			}
			if err != nil {
				return nil, fmt.Errorf("CreateContainerConfigError: %s: %w", e.Name, err)
			}
		}
		vars[e.Name] = val
		env = append(env, e.Name+"="+val)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = expand(a)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(slices.Clone(baseEnv()), env...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(filepath.Join(p.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	return cmd, nil
}

// baseEnv is what a container image has: a PATH and the variables the
// tests' processes need from the machine (none of the test's own).
func baseEnv() []string {
	out := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.TempDir()}
	for _, k := range []string{"LD_LIBRARY_PATH", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// probe runs every pod's readiness probe (HTTP GET on the pod's IP).
func (k *kubelet) probe() {
	k.mu.Lock()
	var all []*pod
	for _, p := range k.pods {
		if !p.terminating && p.cmd != nil {
			all = append(all, p)
		}
	}
	k.mu.Unlock()
	// The kubelet does not verify an HTTPS probe's certificate.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	for _, p := range all {
		c := p.spec.Containers[0]
		rp := c.ReadinessProbe
		ok := true
		if rp != nil && rp.HTTPGet != nil {
			port := rp.HTTPGet.Port.IntValue()
			for _, cp := range c.Ports {
				if cp.Name == rp.HTTPGet.Port.StrVal {
					port = int(cp.ContainerPort)
				}
			}
			scheme := "http"
			if rp.HTTPGet.Scheme == corev1.URISchemeHTTPS {
				scheme = "https"
			}
			resp, err := hc.Get(fmt.Sprintf("%s://%s:%d%s", scheme, p.ip, port, rp.HTTPGet.Path))
			ok = err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
		}
		k.mu.Lock()
		p.ready = ok && !p.terminating
		k.mu.Unlock()
	}
}

// checkVersions records processes of two versions of one job (the
// operator's spec hash, shared by both roles) alive at once, and the most
// coordinators alive at once.
func (k *kubelet) checkVersions() {
	k.mu.Lock()
	defer k.mu.Unlock()
	versions := map[string]map[string]bool{}
	coords := map[string]int{}
	for _, p := range k.pods {
		job := p.ns + "/" + p.labels[LabelInstance]
		if versions[job] == nil {
			versions[job] = map[string]bool{}
		}
		versions[job][p.version] = true
		if p.component == ComponentCoordinator {
			coords[job]++
			k.maxCoordinators = max(k.maxCoordinators, coords[job])
		}
	}
	for job, vs := range versions {
		if len(vs) > 1 && k.overlap == "" {
			k.overlap = fmt.Sprintf("%s: processes of %d versions alive at once", job, len(vs))
		}
	}
}

// ensureService gives a Service an address and a proxy per port.
func (k *kubelet) ensureService(s *corev1.Service) {
	key := s.Namespace + "/" + s.Name
	k.mu.Lock()
	if _, ok := k.services[key]; ok {
		k.mu.Unlock()
		return
	}
	n := int(serviceAddresses.Add(1))
	svc := &service{name: s.Name, ns: s.Namespace, ip: fmt.Sprintf("127.1.%d.%d", n/200, 1+n%200), selector: s.Spec.Selector,
		notReady: s.Spec.PublishNotReadyAddresses, ports: map[int32]string{}}
	k.services[key] = svc
	k.mu.Unlock()
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return // headless: no proxy
	}
	for _, sp := range s.Spec.Ports {
		svc.ports[sp.Port] = sp.TargetPort.StrVal
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", svc.ip, sp.Port))
		if err != nil {
			k.t.Logf("kubelet: service %s port %d: %v", key, sp.Port, err)
			continue
		}
		svc.lns = append(svc.lns, ln)
		go k.proxy(svc, ln, sp.TargetPort.StrVal, int(sp.TargetPort.IntVal))
	}
}

func (k *kubelet) proxy(svc *service, ln net.Listener, targetName string, targetPort int) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			addr, err := k.endpoint(svc, targetName, targetPort)
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, conn); _ = up.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(conn, up)
		}()
	}
}

// endpoint is a pod the Service selects (ready, unless it publishes the
// not-ready ones).
func (k *kubelet) endpoint(svc *service, targetName string, targetPort int) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	names := make([]string, 0, len(k.pods))
	for n := range k.pods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := k.pods[n]
		if p.ns != svc.ns || p.terminating || p.cmd == nil || (!p.ready && !svc.notReady) {
			continue
		}
		match := true
		for lk, lv := range svc.selector {
			if p.labels[lk] != lv {
				match = false
			}
		}
		if !match {
			continue
		}
		port := targetPort
		for _, cp := range p.spec.Containers[0].Ports {
			if cp.Name == targetName {
				port = int(cp.ContainerPort)
			}
		}
		return fmt.Sprintf("%s:%d", p.ip, port), nil
	}
	return "", errors.New("no endpoint")
}

// dnsNames maps the Services' names to their addresses, for a
// strings.Replacer.
func (k *kubelet) dnsNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, s := range k.services {
		out = append(out, s.name+"."+s.ns+".svc", s.ip)
	}
	return out
}

// serviceAddress maps a Service's address (<name>.<namespace>.svc:<port>)
// to its proxy's, for the operator's API calls.
func (k *kubelet) serviceAddress(hostPort string) string {
	host, port, _ := net.SplitHostPort(hostPort)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.services {
		if s.name+"."+s.ns+".svc" == host {
			return net.JoinHostPort(s.ip, port)
		}
	}
	return hostPort
}

// logs prints the tail of every process's log.
func (k *kubelet) logs(lines int) string {
	entries, _ := filepath.Glob(filepath.Join(k.dir, "*", "log"))
	var b strings.Builder
	for _, e := range entries {
		data, _ := os.ReadFile(e)
		ls := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		fmt.Fprintf(&b, "=== %s\n%s\n", filepath.Base(filepath.Dir(e)), strings.Join(ls, "\n"))
	}
	return b.String()
}
