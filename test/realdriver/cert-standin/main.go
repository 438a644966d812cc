// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cert-standin stands in for cert-manager in the cluster of make test-real-driver
// (internal/certstandin says what it does and does not do). It runs on the host, outside the
// cluster, until it gets SIGINT or SIGTERM:
//
//	cert-standin --kubeconfig _output/kind/kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dra-failfast/dra-failfast/internal/certstandin"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	interval := flag.Duration("interval", 500*time.Millisecond, "time between two reconcile rounds")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "cert-standin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string, interval time.Duration) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	s := &certstandin.StandIn{Client: client, Dynamic: dyn}
	if err := s.InstallCRDs(ctx, time.Minute); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("cert-manager stand-in running: Issuer (selfSigned) and Certificate served", "interval", interval)
	s.Run(ctx, interval)
	return nil
}
