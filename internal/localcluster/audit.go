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
	"time"
)

// auditPolicy makes kube-apiserver record every pod status PATCH a node sends, with its body:
// what a kubelet writes to the API, compared between kubelets by the tests. Nothing else is
// recorded, so the log stays small and the apiserver's cost is one line per status patch.
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

// StatusPatches returns the pod status PATCH requests the kubelet sent for pods of namespace,
// in the order the apiserver completed them.
func (c *Cluster) StatusPatches(namespace string) ([]StatusPatch, error) {
	f, err := os.Open(c.p.log("audit"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var patches []StatusPatch
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var event struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			ObjectRef struct {
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestObject            json.RawMessage `json:"requestObject"`
			StageTimestamp           time.Time       `json:"stageTimestamp"`
			RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &event); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", c.p.log("audit"), err)
		}
		if event.Stage != "ResponseComplete" || event.Verb != "patch" || event.ObjectRef.Subresource != "status" || event.ObjectRef.Namespace != namespace {
			continue
		}
		patches = append(patches, StatusPatch{Time: event.StageTimestamp, Namespace: event.ObjectRef.Namespace, Pod: event.ObjectRef.Name,
			User: event.User.Username, Code: event.ResponseStatus.Code, Body: event.RequestObject})
	}
	return patches, scanner.Err()
}
