// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
)

const (
	// WebhookPath is where the test driver serves its validating admission
	// webhook (--webhook-address).
	WebhookPath = "/validate"
	// WebhookNamespaceLabel on a namespace changes what the driver's
	// webhook does there: WebhookOff skips it, WebhookDown sends the
	// namespace's objects to a webhook that is down (nothing listens), to
	// show what failurePolicy Ignore lets through.
	WebhookNamespaceLabel = "dra-failfast.test/webhook"
	WebhookOff            = "off"
	WebhookDown           = "down"
)

// webhookArgs are the driver's flags for serving its webhook: a serving
// certificate for 127.0.0.1 signed by the cluster CA, and an address that
// stays the same across restarts of the driver.
func (d *Driver) webhookArgs(c *localcluster.Cluster) ([]string, error) {
	certFile, keyFile, err := c.IssueServingCert("webhook-"+d.opts.DriverName, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	if d.webhookAddress == "" {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		d.webhookAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return []string{"--webhook-address=" + d.webhookAddress, "--webhook-cert-file=" + certFile, "--webhook-key-file=" + keyFile,
		"--webhook-generated-claims=" + string(d.opts.GeneratedClaims)}, nil
}

// WebhookConfigName is the name of the ValidatingWebhookConfiguration of
// the driver.
func (d *Driver) WebhookConfigName() string { return d.opts.DriverName }

// RegisterWebhook registers the driver's validating admission webhook with
// the API server: ResourceClaims, ResourceClaimTemplates and DeviceClasses
// that carry opaque config for the driver are validated on create and
// update with the driver's own validation.
//
// failurePolicy is Ignore: when the webhook is down, objects are admitted
// unvalidated, and the driver's prepare-time validation still fails a pod
// with invalid config permanently (one pod at a time, which a controller
// replaces: see docs/driver-authors.md). Fail would instead block every
// create of such objects while the webhook is down. matchConditions limit
// the calls to objects with this driver's config, so other drivers' objects
// never wait for this webhook.
func (d *Driver) RegisterWebhook(ctx context.Context, c *localcluster.Cluster) error {
	if d.webhookAddress == "" {
		return fmt.Errorf("driver %s does not serve a webhook: start it with DriverOptions.Webhook", d.opts.DriverName)
	}
	caBundle, err := c.CABundle()
	if err != nil {
		return err
	}
	downPort, err := freePort()
	if err != nil {
		return err
	}
	webhook := func(name, address string, selector metav1.LabelSelectorRequirement) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To("https://" + address + WebhookPath),
				CABundle: caBundle,
			},
			// As deploy/*/webhook.yaml: claims and templates have an
			// immutable spec, only a DeviceClass update can bring config.
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"resource.k8s.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{"resourceclaims", "resourceclaimtemplates"},
				},
			}, {
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"resource.k8s.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{"deviceclasses"},
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{selector}},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "has-driver-config", Expression: driverConfigCondition(d.opts.DriverName)}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: d.WebhookConfigName()},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			webhook("validate."+d.opts.DriverName, d.webhookAddress,
				metav1.LabelSelectorRequirement{Key: WebhookNamespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{WebhookOff, WebhookDown}}),
			webhook("down."+d.opts.DriverName, net.JoinHostPort("127.0.0.1", strconv.Itoa(downPort)),
				metav1.LabelSelectorRequirement{Key: WebhookNamespaceLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{WebhookDown}}),
		},
	}
	client := c.Client().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := client.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register webhook: %w", err)
		}
		old, err := client.Get(ctx, config.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		config.ResourceVersion = old.ResourceVersion
		if _, err := client.Update(ctx, config, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update webhook: %w", err)
		}
	}
	return nil
}

// UnregisterWebhook removes the driver's ValidatingWebhookConfiguration.
func (d *Driver) UnregisterWebhook(ctx context.Context, c *localcluster.Cluster) error {
	err := c.Client().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, d.WebhookConfigName(), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// driverConfigCondition is a CEL expression that is true for a
// ResourceClaim, ResourceClaimTemplate or DeviceClass with opaque config for
// driver.
func driverConfigCondition(driver string) string {
	entry := "c, has(c.opaque) && c.opaque.driver == " + strconv.Quote(driver)
	return strings.Join([]string{
		`(request.resource.resource == "resourceclaims" && has(object.spec.devices) && has(object.spec.devices.config) && object.spec.devices.config.exists(` + entry + `))`,
		`(request.resource.resource == "resourceclaimtemplates" && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.config) && object.spec.spec.devices.config.exists(` + entry + `))`,
		`(request.resource.resource == "deviceclasses" && has(object.spec.config) && object.spec.config.exists(` + entry + `))`,
	}, " || ")
}
