// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package e2eframework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-failfast/dra-failfast/internal/localcluster"
	"github.com/dra-failfast/dra-failfast/internal/testdriver"
	failfastdra "github.com/dra-failfast/dra-failfast/pkg/kubelet/cm/dra"
)

// DeviceClassName is the DeviceClass of the test driver (demo/deviceclass.yaml).
const DeviceClassName = "dra-failfast.test"

// RequestName is the device request of every claim made here.
const RequestName = "dev"

// EnsureDeviceClass creates the test driver's DeviceClass from its manifest.
func EnsureDeviceClass(ctx context.Context, client kubernetes.Interface) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "demo", "deviceclass.yaml"))
	if err != nil {
		return err
	}
	var class resourceapi.DeviceClass
	if err := yaml.UnmarshalStrict(data, &class); err != nil {
		return fmt.Errorf("deviceclass.yaml: %w", err)
	}
	_, err = client.ResourceV1().DeviceClasses().Create(ctx, &class, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// DeviceClassFor is the name of the DeviceClass that EnsureDeviceClassFor
// creates for driverName: DeviceClassName for the default driver, else the
// driver name.
func DeviceClassFor(driverName string) string {
	if driverName == "" || driverName == testdriver.DefaultDriverName {
		return DeviceClassName
	}
	return driverName
}

// EnsureDeviceClassFor creates a DeviceClass that selects only the devices
// of driverName and returns its name (DeviceClassFor). For the default
// driver that is the class of EnsureDeviceClass.
func EnsureDeviceClassFor(ctx context.Context, client kubernetes.Interface, driverName string) (string, error) {
	name := DeviceClassFor(driverName)
	if name == DeviceClassName {
		return name, EnsureDeviceClass(ctx, client)
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == " + strconv.Quote(driverName)},
		}}},
	}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create DeviceClass %s: %w", name, err)
	}
	return name, nil
}

// ClaimTemplate returns a ResourceClaimTemplate for one device of the test
// driver, with parameters as its opaque config (nil: none). The parameters
// are normally testdriver.BehaviorSpec.Parameters(); any other bytes are sent
// as they are (to send invalid config).
func ClaimTemplate(namespace, name string, parameters []byte) *resourceapi.ResourceClaimTemplate {
	return ClaimTemplateFor(namespace, name, DeviceClassName, testdriver.DefaultDriverName, parameters)
}

// ClaimTemplateFor returns a ResourceClaimTemplate for one device of
// deviceClass, with parameters as opaque config for driverName (nil: none).
func ClaimTemplateFor(namespace, name, deviceClass, driverName string, parameters []byte) *resourceapi.ResourceClaimTemplate {
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: RequestName, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: deviceClass}}},
		}}},
	}
	if parameters == nil {
		return tmpl
	}
	tmpl.Spec.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{
		Requests: []string{RequestName},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: parameters},
		}},
	}}
	return tmpl
}

// PodSpec returns a spec with one workload container using a claim made from template.
func PodSpec(template string, restartPolicy v1.RestartPolicy) v1.PodSpec {
	return v1.PodSpec{
		RestartPolicy:                 restartPolicy,
		TerminationGracePeriodSeconds: ptr.To[int64](2),
		ResourceClaims:                []v1.PodResourceClaim{{Name: RequestName, ResourceClaimTemplateName: &template}},
		Containers: []v1.Container{{
			Name:            "workload",
			Image:           localcluster.WorkloadImage,
			ImagePullPolicy: v1.PullNever,
			Resources:       v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: RequestName}}},
		}},
	}
}

// Pod returns a pod named name that uses a claim made from template.
func Pod(namespace, name, template string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: PodSpec(template, v1.RestartPolicyNever)}
}

// CreateNamespace creates a namespace and waits for its default ServiceAccount.
func CreateNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	return CreateNamespaceWithLabels(ctx, client, name, nil)
}

// CreateNamespaceWithLabels creates a namespace with labels (e.g.
// WebhookNamespaceLabel) and waits for its default ServiceAccount.
func CreateNamespaceWithLabels(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// WaitForPod polls the pod until done says so, or timeout. It returns the
// last pod seen.
func WaitForPod(ctx context.Context, client kubernetes.Interface, namespace, name string, timeout time.Duration, done func(*v1.Pod) bool) (*v1.Pod, error) {
	var pod *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return done(p), nil
	})
	return pod, err
}

// StartedContainers lists the containers of pod that ever started.
func StartedContainers(pod *v1.Pod) []string {
	var started []string
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			// A container that never ran still gets a synthesized Terminated
			// state (ContainerStatusUnknown) when the pod fails: no ID, no start.
			ran := s.State.Terminated != nil && (s.State.Terminated.ContainerID != "" || !s.State.Terminated.StartedAt.IsZero())
			if ran || s.State.Running != nil || s.ContainerID != "" || s.RestartCount > 0 {
				started = append(started, s.Name)
			}
		}
	}
	return started
}

// ConditionJob returns Job name whose pods use a claim made from template, with a backoffLimit of 6
// and a podFailurePolicy whose last rule fails the Job on the DRA failure's pod condition; rules
// come before it.
func ConditionJob(namespace, name, template string, rules ...batchv1.PodFailurePolicyRule) *batchv1.Job {
	rules = append(rules, batchv1.PodFailurePolicyRule{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: failfastdra.PodConditionType, Status: v1.ConditionTrue}},
	})
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit:     ptr.To[int32](6),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: rules},
			Template:         v1.PodTemplateSpec{Spec: PodSpec(template, v1.RestartPolicyNever)},
		},
	}
}

// JobFailedReason waits up to timeout for Job namespace/name to fail and returns the reason of its
// Failed condition, "" if it did not fail in time.
func JobFailedReason(ctx context.Context, client kubernetes.Interface, namespace, name string, timeout time.Duration) string {
	var reason string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == v1.ConditionTrue {
				reason = c.Reason
				return true, nil
			}
		}
		return false, nil
	})
	return reason
}
