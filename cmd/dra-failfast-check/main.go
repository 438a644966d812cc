// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dra-failfast-check shows driver authors and operators what the
// dra-failfast kubelet will decide about a DRA driver's answers. It calls
// the driver's NodePrepareResources for the given ResourceClaims exactly as
// the kubelet does (one call, namespace, name and UID of each claim), prints
// per claim what the driver answered (error text, the raw bytes of
// error_type, field 3, and its decoded value) and what the fork decides
// (prepared, transient or permanent, and why), then calls
// NodeUnprepareResources for all of them so that nothing stays prepared.
//
//	dra-failfast-check -driver NAME [-socket PATH] [-kubeconfig FILE] [-policy FILE] [-o text|json] [-allow-taint] NAMESPACE/CLAIM...
//	dra-failfast-check -validate-policy [-policy FILE]
//
// -validate-policy only checks a DRA driver failure policy file as the
// kubelet does at start (strict decoding, validation, errors naming the
// entry at fault) and prints the policy it would put in effect: run it
// before restarting a kubelet, which refuses to start on an invalid policy.
//
// The decisions follow the node's DRA driver failure policy (-policy, by
// default the file the kubelet reads): a driver whose Permanent answers the
// policy ignores gets "transient", and the report says what the driver's
// rule (Honor or Ignore, retry budget) does with its answer.
//
// A driver built with failfastplugin.StartWithDeviceFaults taints a device
// in the live cluster when it fails a claim with DeviceFault. The check asks
// the driver not to (failfastplugin.NoTaintMetadataKey): a driver on the
// library then fails the claim permanently all the same, says that the
// device was not tainted, and the cluster stays as it was. -allow-taint lets
// the driver taint as it would for the kubelet. Either way the check lists
// the devices tainted during it with how to clear them, and exits 1 when
// there are any without -allow-taint (a driver that did not honor the
// request).
//
// The claims must be allocated to a device of the driver and reserved for
// no pod: a claim in use belongs to the kubelet. Run it on the driver's node,
// as a user who may open the socket. Exit status: 0 when the check ran (what
// the driver answered is in the output), 1 when it could not.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-failfast/dra-failfast/api/decision"
	"github.com/dra-failfast/dra-failfast/cmd/dra-failfast-check/drivercheck"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dra-failfast-check:", err)
		os.Exit(1)
	}
}

func run() error {
	driver := flag.String("driver", "", "the DRA driver name (required)")
	socket := flag.String("socket", "", "the driver's DRA socket (default /var/lib/kubelet/plugins/<driver>/dra.sock)")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig to look the claims up with (default $KUBECONFIG, else in-cluster)")
	output := flag.String("o", "text", "output: text or json")
	timeout := flag.Duration("timeout", 45*time.Second, "timeout of each gRPC call")
	policyFile := flag.String("policy", "", "the node's DRA driver failure policy file, which the decisions follow (default: $"+decision.DriverPolicyEnv+", else "+decision.DefaultDriverPolicyPath+" if it exists)")
	onlyValidate := flag.Bool("validate-policy", false, "only check the policy file (-policy, or the kubelet's) as the kubelet does at start, print the policy in effect, and exit")
	allowTaint := flag.Bool("allow-taint", false, "let the driver taint devices it reports broken during the check, as for the kubelet (otherwise the check asks it not to, and fails if it did anyway, after saying which)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s -driver NAME [flags] NAMESPACE/CLAIM...\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if *onlyValidate {
		if flag.NArg() != 0 {
			return fmt.Errorf("-validate-policy takes no claims, got %q", flag.Args())
		}
		return validatePolicy(os.Stdout, *policyFile)
	}
	if *driver == "" || flag.NArg() == 0 {
		flag.Usage()
		return fmt.Errorf("need -driver and at least one NAMESPACE/CLAIM")
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o %q: want text or json", *output)
	}
	if *socket == "" {
		*socket = filepath.Join("/var/lib/kubelet/plugins", *driver, "dra.sock")
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Say it before the driver is called: the check talks to a live driver,
	// and a driver built with failfastplugin.StartWithDeviceFaults taints a
	// device in the cluster when it reports it broken.
	note := "dra-failfast-check: -allow-taint: a driver that reports a device fault for one of these claims taints the device (the scheduler then avoids it) until the driver clears it; the report names any device tainted during the check."
	if !*allowTaint {
		note = "dra-failfast-check: the driver is asked not to taint devices during the check (a driver on failfastplugin v0.1.0 or later honors it); a device tainted anyway is reported and fails the check (-allow-taint lets the driver taint)."
	}
	fmt.Fprintln(os.Stderr, note)
	policyPath, policy, err := decision.ReadDriverPolicy(*policyFile)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dra-failfast-check: node policy from %s: %s\n", policyPath, policy)
	report, err := drivercheck.Run(ctx, client, drivercheck.Options{Driver: *driver, Socket: *socket, Claims: flag.Args(), Timeout: *timeout, AllowTaint: *allowTaint, Policy: policy})
	if report != nil {
		if *output == "json" {
			data, jsonErr := json.MarshalIndent(report, "", "  ")
			if jsonErr != nil {
				return jsonErr
			}
			fmt.Println(string(data))
		} else {
			fmt.Print(report.Text())
		}
	}
	return err
}

// validatePolicy checks the policy file as the kubelet does at start and
// writes the policy it would put in effect.
func validatePolicy(w io.Writer, file string) error {
	path, policy, err := decision.ReadDriverPolicy(file)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s: valid; the kubelet would put in effect: %s\n", path, policy)
	return err
}
