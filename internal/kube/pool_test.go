package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/probegate/probegate/internal/config"
)

// inferencePool is an InferencePool (v1) as the API server returns it.
func inferencePool(name string, matchLabels map[string]any, ports ...int64) *unstructured.Unstructured {
	tp := make([]any, 0, len(ports))
	for _, p := range ports {
		tp = append(tp, map[string]any{"number": p})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1",
		"kind":       "InferencePool",
		"metadata":   map[string]any{"name": name, "namespace": "models"},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": matchLabels},
			"targetPorts":       tp,
			"endpointPickerRef": map[string]any{"name": "epp", "port": map[string]any{"number": int64(9002)}},
		},
	}}
}

// pod is a model server pod.
func pod(name, ip string, lbls map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "models", Labels: lbls},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
		},
	}
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{InferencePoolGVR: "InferencePoolList"}, objs...)
}

func updatePod(t *testing.T, cs *fake.Clientset, p *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods("models").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInferencePoolLifecycle(t *testing.T) {
	llama := map[string]string{"app": "llama"}
	mistral := map[string]string{"app": "mistral"}
	a := pod("llama-a", "10.0.0.1", llama, true)
	b := pod("llama-b", "10.0.0.2", llama, false)
	noIP := pod("llama-c", "", llama, true)
	m := pod("mistral-a", "10.0.1.1", mistral, true)
	cs := fake.NewClientset(a, b, noIP, m)
	dyn := newDynamic(inferencePool("llama-pool", map[string]any{"app": "llama"}, 8000),
		inferencePool("other-pool", map[string]any{"app": "mistral"}, 8000))
	s := newSets()
	var lb logBuf
	k := config.Kubernetes{InferencePool: "llama-pool", Namespace: "models"}
	initial, stop, err := StartWith(Clients{Pods: cs.CoreV1(), Dynamic: dyn, Root: cs}, k, lb.logger(), s.publish, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	want(t, urls(initial), "10.0.0.1:8000")
	if o := initial[0].Origin; o != "kubernetes:inferencepool/models/llama-pool pod/llama-a" {
		t.Fatalf("origin %q", o)
	}

	// b turns ready: it joins.
	b = b.DeepCopy()
	b.Status.Conditions[0].Status = corev1.ConditionTrue
	updatePod(t, cs, b)
	want(t, s.next(t), "10.0.0.1:8000", "10.0.0.2:8000")

	// a is being deleted (deletionTimestamp set, still Ready): it drains.
	a = a.DeepCopy()
	a.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	updatePod(t, cs, a)
	want(t, s.next(t), "10.0.0.2:8000")

	// b fails its readiness probe: it drains too.
	b = b.DeepCopy()
	b.Status.Conditions[0].Status = corev1.ConditionFalse
	updatePod(t, cs, b)
	want(t, s.next(t))

	// The pool's selector and ports change: the mistral pod, on both ports.
	p := inferencePool("llama-pool", map[string]any{"app": "mistral"}, 8000, 8001)
	p.SetResourceVersion("")
	if _, err := dyn.Resource(InferencePoolGVR).Namespace("models").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, s.next(t), "10.0.1.1:8000", "10.0.1.1:8001")
	if lb.count("InferencePool selector changed") != 1 {
		t.Fatal("selector change not logged")
	}

	// A llama pod changing no longer matters.
	b = b.DeepCopy()
	b.Status.Conditions[0].Status = corev1.ConditionTrue
	updatePod(t, cs, b)
	s.none(t, 200*time.Millisecond)

	// The pool is deleted: no backends, said once.
	if err := dyn.Resource(InferencePoolGVR).Namespace("models").Delete(context.Background(), "llama-pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, s.next(t))
	if lb.count("InferencePool not found") != 1 {
		t.Fatal("pool deletion not logged once")
	}
}

func TestInferencePoolSpecProblems(t *testing.T) {
	lbl := map[string]string{"app": "llama"}
	tests := []struct {
		name string
		pool *unstructured.Unstructured
		port int
		want []string
		warn string
	}{
		{"port selects a target port", inferencePool("p", map[string]any{"app": "llama"}, 8000, 8001), 8001, []string{"10.0.0.1:8001"}, ""},
		{"port not a target port", inferencePool("p", map[string]any{"app": "llama"}, 8000), 9000, nil, "does not list backends.kubernetes.port 9000"},
		{"no selector", inferencePool("p", map[string]any{}, 8000), 0, nil, "spec.selector.matchLabels is empty"},
		{"no ports", inferencePool("p", map[string]any{"app": "llama"}), 0, nil, "spec.targetPorts is empty"},
		{"missing pool", inferencePool("q", map[string]any{"app": "llama"}, 8000), 0, nil, "InferencePool not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(pod("a", "10.0.0.1", lbl, true))
			var lb logBuf
			k := config.Kubernetes{InferencePool: "p", Namespace: "models", Port: tt.port}
			initial, stop, err := StartWith(Clients{Pods: cs.CoreV1(), Dynamic: newDynamic(tt.pool), Root: cs}, k, lb.logger(), newSets().publish, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			stop()
			want(t, urls(initial), tt.want...)
			if tt.warn != "" && lb.count(tt.warn) != 1 {
				t.Fatalf("want one log line with %q:\n%s", tt.warn, lb.b.String())
			}
		})
	}
}
