package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/route"
)

const streamChunks = 15

// modelPod is a fake model server on its own loopback address: it counts the
// completions it receives and streams streamChunks SSE events 20ms apart
// when asked to stream.
type modelPod struct {
	ip       string
	requests atomic.Int64
	srv      *http.Server
}

func (m *modelPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.requests.Add(1)
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range streamChunks {
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// startPods starts one modelPod on each of 127.0.0.1 and 127.0.0.2 at the
// same port (as pods of a Service share their target port).
func startPods(t *testing.T) ([]*modelPod, int) {
	t.Helper()
	for try := 0; try < 20; try++ {
		ln1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln1.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
		if err != nil {
			ln1.Close()
			continue
		}
		var pods []*modelPod
		for i, ln := range []net.Listener{ln1, ln2} {
			m := &modelPod{ip: fmt.Sprintf("127.0.0.%d", i+1)}
			m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = m.srv.Serve(ln) }()
			pods = append(pods, m)
		}
		t.Cleanup(func() {
			for _, m := range pods {
				_ = m.srv.Close()
			}
		})
		return pods, port
	}
	t.Skip("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil, 0
}

// A pod that starts terminating leaves the pool within one event delivery:
// its open stream completes, and no request sent after the event reaches
// it. The event-to-drain delay is measured over several cycles.
func TestTerminatingPodDrains(t *testing.T) {
	pods, port := startPods(t)
	es := slice("vllm-abc", "vllm", int32(port), endpoint("127.0.0.1", "pod-1", true, false), endpoint("127.0.0.2", "pod-2", true, false))
	cs := fake.NewClientset(es)
	p, base := startProxy(t, config.Kubernetes{Service: "vllm", Namespace: "models"}, Clients{EndpointSlices: cs.DiscoveryV1(), Root: cs})
	setConditions := func(victim int, c discoveryv1.EndpointConditions) {
		es = es.DeepCopy()
		es.Endpoints[victim].Conditions = c
		if _, err := cs.DiscoveryV1().EndpointSlices("models").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	drainCycles(t, p, base, pods, port,
		func(victim int) { // the pod starts terminating
			setConditions(victim, discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)})
		},
		func(victim int) { // a new pod at the same IP is ready
			setConditions(victim, discoveryv1.EndpointConditions{Ready: ptr(true), Terminating: ptr(false)})
		})
}

// The same through an InferencePool: the pod's deletion starts
// (deletionTimestamp set while it is still Ready).
func TestInferencePoolPodDrains(t *testing.T) {
	pods, port := startPods(t)
	lbl := map[string]string{"app": "llama"}
	pp := []*corev1.Pod{pod("pod-1", "127.0.0.1", lbl, true), pod("pod-2", "127.0.0.2", lbl, true)}
	cs := fake.NewClientset(pp[0], pp[1])
	dyn := newDynamic(inferencePool("llama", map[string]any{"app": "llama"}, int64(port)))
	p, base := startProxy(t, config.Kubernetes{InferencePool: "llama", Namespace: "models"}, Clients{Pods: cs.CoreV1(), Dynamic: dyn, Root: cs})
	setDeleting := func(victim int, deleting bool) {
		pp[victim] = pp[victim].DeepCopy()
		pp[victim].DeletionTimestamp = nil
		if deleting {
			pp[victim].DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		if _, err := cs.CoreV1().Pods("models").Update(context.Background(), pp[victim], metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	drainCycles(t, p, base, pods, port,
		func(victim int) { setDeleting(victim, true) },
		func(victim int) { setDeleting(victim, false) })
}

// startProxy serves a round-robin proxy whose backends come from
// Kubernetes discovery over cl, until the test ends.
func startProxy(t *testing.T, k config.Kubernetes, cl Clients) (*route.Proxy, string) {
	t.Helper()
	cfg := config.Default()
	cfg.Backends.Kubernetes = k
	cfg.Route.Policy = config.PolicyRoundRobin
	cfg.Log.Access = false
	discover := func(k config.Kubernetes, log zerolog.Logger, publish func([]route.Target)) ([]route.Target, func(), error) {
		return StartWith(cl, k, log, publish, 5*time.Second)
	}
	p, err := route.New(route.Options{Config: cfg, Discover: discover})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = p.Serve(ln); close(served) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		<-served
	})
	if p.Pool().Len() != 2 {
		t.Fatalf("pool has %d backends, want 2", p.Pool().Len())
	}
	return p, "http://" + ln.Addr().String()
}

// drainCycles runs five cycles of: open a stream, terminate the pod it
// landed on, measure until that pod leaves the pool, send requests that
// must all go elsewhere, finish the stream, restore the pod.
func drainCycles(t *testing.T, p *route.Proxy, base string, pods []*modelPod, port int, terminate, restore func(victim int)) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var delays, fromCall []time.Duration
	for cycle := range 5 {
		// Open a stream and find the pod it landed on.
		before := [2]int64{pods[0].requests.Load(), pods[1].requests.Load()}
		resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		if _, err := rd.ReadString('\n'); err != nil { // the first event arrived
			t.Fatal(err)
		}
		victim := 0
		if pods[1].requests.Load() > before[1] {
			victim = 1
		}
		addr := net.JoinHostPort(pods[victim].ip, strconv.Itoa(port))

		// The pod starts terminating. The fake API server emits the watch event inside Update, whose
		// own write path takes ~10ms under -race: the delay is measured
		// both from the call and from its return (the event's delivery
		// lies between the two).
		t0 := time.Now()
		terminate(victim)
		t1 := time.Now()
		for inPool(p, addr) {
			if time.Since(t0) > 5*time.Second {
				t.Fatalf("cycle %d: %s still in the pool 5s after it started terminating", cycle, addr)
			}
			time.Sleep(20 * time.Microsecond)
		}
		t2 := time.Now()
		fromCall = append(fromCall, t2.Sub(t0))
		delays = append(delays, t2.Sub(t1))

		// New requests all go to the other pod.
		got := pods[victim].requests.Load()
		for i := range 10 {
			r, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Fatalf("cycle %d request %d: status %d", cycle, i, r.StatusCode)
			}
		}
		if n := pods[victim].requests.Load() - got; n != 0 {
			t.Fatalf("cycle %d: %d requests reached the terminating pod after the event", cycle, n)
		}

		// The stream to the terminating pod completes.
		rest, err := io.ReadAll(rd)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("cycle %d: stream cut: %v", cycle, err)
		}
		if n := strings.Count(string(rest), "data: {"); n != streamChunks-1 || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Fatalf("cycle %d: stream incomplete after the drain: %d more events, tail %q", cycle, n, rest[max(0, len(rest)-40):])
		}

		// The pod comes back (a new pod at the same IP): it rejoins.
		restore(victim)
		for deadline := time.Now().Add(5 * time.Second); !inPool(p, addr); {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %s did not rejoin", cycle, addr)
			}
			time.Sleep(time.Millisecond)
		}
	}
	slices.Sort(delays)
	slices.Sort(fromCall)
	t.Logf("event-to-drain delay over %d cycles, from the API write's return: min %v, median %v, max %v; from the write call (including the fake API's own write): median %v, max %v (-race, shared machine)",
		len(delays), delays[0], delays[len(delays)/2], delays[len(delays)-1], fromCall[len(fromCall)/2], fromCall[len(fromCall)-1])
	if med := delays[len(delays)/2]; med > 50*time.Millisecond {
		t.Fatalf("median event-to-drain delay %v, goal < 50ms", med)
	}
}

func inPool(p *route.Proxy, addr string) bool {
	return slices.ContainsFunc(p.Pool().Backends(), func(b *route.Backend) bool { return b.Addr() == addr })
}
