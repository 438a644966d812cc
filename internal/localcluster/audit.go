// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// auditPolicy makes kube-apiserver record every pod status PATCH a node sends, with its body:
// what a kubelet writes to the API, compared between kubelets by the tests; and, without
// bodies, every request a node makes about a pod (the pod, its status, its claims, its
// service account token, its Events), counted per pod by the benchmark. Nothing else is
// recorded, so the log stays small: one line per such request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  userGroups: ["system:nodes"]
  verbs: ["patch"]
  resources:
  - group: ""
    resources: ["pods/status"]
- level: Metadata
  userGroups: ["system:nodes"]
  resources:
  - group: ""
    resources: ["pods", "pods/status", "serviceaccounts/token", "events", "configmaps", "secrets"]
  - group: "events.k8s.io"
    resources: ["events"]
  - group: "resource.k8s.io"
    resources: ["resourceclaims"]
- level: None
`

func (c *Cluster) auditArgs() ([]string, error) {
	if err := writeFile(c.p.file("config", "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + c.p.file("config", "audit-policy.yaml"),
		"--audit-log-path=" + c.p.log("audit"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxbackup=1",
		"--audit-log-maxsize=200",
	}, nil
}

// StatusPatch is one pod status PATCH that a node sent, from the apiserver's audit log.
type StatusPatch struct {
	Time      time.Time
	Namespace string
	Pod       string
	User      string
	Code      int
	// Body is the patch as sent (a strategic merge patch).
	Body json.RawMessage
}

// auditEvent is what the tests read of one audit log line.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	ObjectRef struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject"`
	StageTimestamp time.Time       `json:"stageTimestamp"`
}

// eachAuditEvent calls do for every completed request of the audit log in namespace.
func (c *Cluster) eachAuditEvent(namespace string, do func(*auditEvent)) error {
	f, err := os.Open(c.p.log("audit"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var event auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &event); err != nil {
			return fmt.Errorf("audit log %s: %w", c.p.log("audit"), err)
		}
		if event.Stage == "ResponseComplete" && event.ObjectRef.Namespace == namespace {
			do(&event)
		}
	}
	return scanner.Err()
}

// StatusPatches returns the pod status PATCH requests the kubelet sent for pods of namespace,
// in the order the apiserver completed them.
func (c *Cluster) StatusPatches(namespace string) ([]StatusPatch, error) {
	var patches []StatusPatch
	err := c.eachAuditEvent(namespace, func(event *auditEvent) {
		if event.Verb == "patch" && event.ObjectRef.Subresource == "status" {
			patches = append(patches, StatusPatch{Time: event.StageTimestamp, Namespace: event.ObjectRef.Namespace, Pod: event.ObjectRef.Name,
				User: event.User.Username, Code: event.ResponseStatus.Code, Body: event.RequestObject})
		}
	})
	return patches, err
}

// NodeRequestsRefused counts, like NodeRequests, the requests of nodes in namespace that the
// apiserver answered with an error (a code of 400 or more): a GET of a pod refused by the node
// authorizer before it learned the pod's binding, for example, which the kubelet then retries.
func (c *Cluster) NodeRequestsRefused(namespace string) (map[string]int, error) {
	counts := map[string]int{}
	err := c.eachAuditEvent(namespace, func(event *auditEvent) {
		if resource, ok := nodeRequestResource(event); ok && event.ResponseStatus.Code >= 400 {
			counts[event.Verb+" "+resource]++
		}
	})
	return counts, err
}

// NodeRequestTimeline lists the requests that nodes made in namespace (as NodeRequests
// counts them), one "time verb resource[/subresource] name code" line each, in the order
// the apiserver completed them: what a test prints when a count is off.
func (c *Cluster) NodeRequestTimeline(namespace string) ([]string, error) {
	var lines []string
	err := c.eachAuditEvent(namespace, func(event *auditEvent) {
		resource, ok := nodeRequestResource(event)
		if !ok {
			return
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s %d", event.StageTimestamp.Format("15:04:05.000"), event.Verb, resource, event.ObjectRef.Name, event.ResponseStatus.Code))
	})
	return lines, err
}

// NodeRequests counts the requests that nodes made in namespace about pods, their status,
// claims, service account tokens and Events, by "verb resource[/subresource]" (e.g.
// "get pods", "patch pods/status", "create events"), from the apiserver's audit log.
func (c *Cluster) NodeRequests(namespace string) (map[string]int, error) {
	counts := map[string]int{}
	err := c.eachAuditEvent(namespace, func(event *auditEvent) {
		resource, ok := nodeRequestResource(event)
		if !ok {
			return
		}
		counts[event.Verb+" "+resource]++
	})
	return counts, err
}

// nodeRequestResource returns "resource[/subresource]" of a request that a node made.
func nodeRequestResource(event *auditEvent) (string, bool) {
	if !strings.HasPrefix(event.User.Username, "system:node:") {
		return "", false
	}
	resource := event.ObjectRef.Resource
	if event.ObjectRef.Subresource != "" {
		resource += "/" + event.ObjectRef.Subresource
	}
	return resource, true
}
