package probe

// The share of a pod's requests that other clients sent: what the reports
// say the pod holds beyond this proxy's own in-flight requests there. With
// several proxy replicas (or direct clients) in front of a pod, each proxy
// sends a fraction of its traffic and times only its own requests' first
// bytes, whose waits include work it never saw; a lone proxy sends it all.
// The router uses the share to tell the two apart (route.load.
// pod_speed_foreign).
//
// One report's share is max(queue - own, 0) / queue, where queue is the
// report's running + waiting (or /load's in-flight count) and own is this
// proxy's in-flight count when the report was published. A lone proxy's
// reports show none: requests it sent that the pod has not registered yet,
// and requests the pod has finished that this proxy has not yet seen end,
// both make queue - own smaller, not larger. The share is a mean over
// reports (foreignAlpha per report, from 0), so one report that caught a
// request this proxy already saw end while the pod still counted it (a
// client that went away) cannot open it alone. A report without a queue,
// or with an empty one, says nothing about who sends and leaves it as it
// was.

// foreignAlpha is the weight of each report in the foreign share's mean.
const foreignAlpha = 0.2

// nextForeign returns the foreign share after a report l that this proxy
// published with own of its requests in flight to the backend.
func nextForeign(share float64, l *Load, own int) float64 {
	q := l.Queue()
	if q <= 0 {
		return share
	}
	f := float64(max(q-own, 0)) / float64(q)
	return share + foreignAlpha*(f-share)
}

// ForeignShare returns the mean share of the backend's reported requests
// that were not this proxy's (see nextForeign), 0 before any report with a
// queue. Lock-free.
func (s *State) ForeignShare() float64 {
	if r := s.latest.Load(); r != nil {
		return r.foreign
	}
	return 0
}
