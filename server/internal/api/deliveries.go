package api

import (
	"context"

	"sluice.dev/server/internal/notify"
)

// StartDeliveries runs the notification engine of this replica over the
// server's (routed, instrumented) driver, woken by every post it serves.
// The returned function stops it and waits for its sends in flight.
func (s *Server) StartDeliveries(ctx context.Context) (stop func(), err error) {
	if !s.opts.Deliveries {
		return func() {}, nil
	}
	eng, err := notify.New(s.drv, notify.Options{
		Timeout:       s.opts.DeliveryTimeout,
		Concurrency:   s.opts.DeliveryConcurrency,
		PerSubscriber: s.opts.DeliveryPerSubscriber,
		Poll:          s.opts.DeliveryPoll,
		IdlePoll:      s.opts.DeliveryIdlePoll,
		RetryMin:      s.opts.DeliveryRetryMin,
		RetryMax:      s.opts.DeliveryRetryMax,
		SMTPURL:       s.opts.SMTPURL,
		SignKey:       s.signKey,
		Trusts:        s.trusts,
	}, s.log, s.m)
	if err != nil {
		return nil, err
	}
	s.afterPost = eng.Wake
	s.onSubscribe = eng.Subscribed
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Run(ectx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}
