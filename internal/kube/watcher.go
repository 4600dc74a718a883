package kube

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/route"
)

// source is one kind of discovery (EndpointSlices, InferencePool). Its
// informers signal the watcher on every event; the watcher's one worker
// goroutine then asks it for the whole current set.
type source interface {
	// run starts the source's informers under ctx; it does not block.
	run(ctx context.Context)
	// synced reports whether the informers have listed once.
	synced() bool
	// targets computes the current set from the informers' caches. It is
	// called only from the worker goroutine (and once before it starts).
	targets(ctx context.Context) []route.Target
}

// watcher runs one source: it owns the worker goroutine that recomputes
// and publishes the set, and tracks the API connection's health.
type watcher struct {
	k       config.Kubernetes
	log     zerolog.Logger
	publish func([]route.Target)
	syncTO  time.Duration
	root    any // see Clients.Root

	ctx    context.Context
	cancel context.CancelFunc
	dirty  chan struct{} // capacity 1: coalesces events that arrive during a recompute
	wg     sync.WaitGroup
	done   chan struct{}

	failing atomic.Bool  // the last list or watch call failed
	count   atomic.Int64 // size of the last published set, for logs

	last []route.Target // worker only
}

func newWatcher(k config.Kubernetes, log zerolog.Logger, publish func([]route.Target)) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	src := "service/" + k.Service
	if k.InferencePool != "" {
		src = "inferencepool/" + k.InferencePool
	}
	return &watcher{
		k:       k,
		log:     log.With().Str("discovery", "kubernetes").Str("namespace", k.Namespace).Str("source", src).Logger(),
		publish: publish,
		ctx:     ctx,
		cancel:  cancel,
		dirty:   make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// start runs src, waits up to syncTimeout for its first list, returns the
// initial set and starts the worker.
func (w *watcher) start(src source, syncTimeout time.Duration) []route.Target {
	w.syncTO = syncTimeout
	src.run(w.ctx)
	if !w.waitSynced(src.synced) {
		w.log.Warn().Dur("waited", syncTimeout).Msg("Kubernetes API gave no answer yet: starting with no backends; they join when it answers")
	}
	w.last = src.targets(w.ctx)
	w.count.Store(int64(len(w.last)))
	w.log.Info().Int("backends", len(w.last)).Msg("Kubernetes discovery started")
	go w.loop(src)
	return w.last
}

// waitSynced waits for synced, at most w.syncTO.
func (w *watcher) waitSynced(synced cache.InformerSynced) bool {
	ctx, cancel := context.WithTimeout(w.ctx, w.syncTO)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), synced)
}

// loop recomputes the set after each burst of events and publishes it when
// it changed.
func (w *watcher) loop(src source) {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.dirty:
		}
		ts := src.targets(w.ctx)
		if w.ctx.Err() != nil {
			return
		}
		if slices.Equal(ts, w.last) {
			continue
		}
		w.last = ts
		w.count.Store(int64(len(ts)))
		w.log.Info().Int("backends", len(ts)).Msg("Kubernetes backends changed")
		w.publish(ts)
	}
}

// stop ends the worker and every informer, and waits for them.
func (w *watcher) stop() {
	w.cancel()
	<-w.done
	w.wg.Wait()
}

// changed marks the set as needing a recompute. It never blocks.
func (w *watcher) changed() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// handler signals the watcher on every add, update and delete.
func (w *watcher) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.changed() },
		UpdateFunc: func(any, any) { w.changed() },
		DeleteFunc: func(any) { w.changed() },
	}
}

// lister is the List and Watch of one resource's client, typed or dynamic
// (L is its list type).
type lister[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// informerOf builds a shared informer signalling w over api, every list
// and watch narrowed by sel (a label or field selector) and reporting the
// connection's health, for objects of example's type.
func informerOf[L runtime.Object](w *watcher, api lister[L], sel func(*metav1.ListOptions), example runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel(&o)
			obj, err := api.List(ctx, o)
			w.health(ctx, err)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel(&o)
			wi, err := api.Watch(ctx, o)
			w.health(ctx, err)
			return wi, err
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, w.root), example, 0, cache.Indexers{})
	// The list and watch wrappers above log the loss once; the reflector's
	// own per-retry logging would repeat it every backoff step.
	_ = inf.SetWatchErrorHandler(func(*cache.Reflector, error) {})
	_, _ = inf.AddEventHandler(w.handler())
	return inf
}

// runInformer runs inf until ctx ends; stop waits for it.
func (w *watcher) runInformer(ctx context.Context, inf cache.SharedIndexInformer) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		inf.RunWithContext(ctx)
	}()
}

// health records the outcome of one list or watch call, logging only the
// transitions: the first failure (the last known set keeps serving) and
// the first success after failures.
func (w *watcher) health(ctx context.Context, err error) {
	if err != nil {
		if ctx.Err() != nil {
			return // stopping, not failing
		}
		if !w.failing.Swap(true) {
			w.log.Warn().Err(err).Int64("backends", w.count.Load()).Msg("Kubernetes API unreachable: keeping the last known backends")
		}
		return
	}
	if w.failing.Swap(false) {
		w.log.Info().Msg("Kubernetes API reachable again")
	}
}
