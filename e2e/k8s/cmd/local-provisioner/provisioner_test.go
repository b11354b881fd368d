package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func claim(modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{}
	c.Namespace, c.Name = "ns", "data"
	c.Spec.AccessModes = modes
	c.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	return c
}

func TestProvisionMakesPinnedVolume(t *testing.T) {
	root := t.TempDir()
	p := &localProvisioner{root: root}
	retain := v1.PersistentVolumeReclaimRetain
	pv, state, err := p.Provision(context.Background(), controller.ProvisionOptions{
		PVName: "pvc-1", PVC: claim(v1.ReadWriteOnce), SelectedNodeName: "sim-metal-1",
		StorageClass: &storagev1.StorageClass{ReclaimPolicy: &retain},
	})
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision: %v (state %v)", err, state)
	}
	dir := filepath.Join(root, "pvc-1")
	if pv.Name != "pvc-1" || pv.Spec.Local == nil || pv.Spec.Local.Path != dir {
		t.Fatalf("PV name/path: %s %+v", pv.Name, pv.Spec.Local)
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != volumeMode {
		t.Fatalf("volume directory: %v %v", st, err)
	}
	req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != hostnameLabel || req.Operator != v1.NodeSelectorOpIn || len(req.Values) != 1 || req.Values[0] != "sim-metal-1" {
		t.Fatalf("node affinity: %+v", req)
	}
	if got := pv.Spec.Capacity[v1.ResourceStorage]; got.String() != "1Gi" {
		t.Fatalf("capacity %s, want 1Gi", got.String())
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != retain {
		t.Fatalf("reclaim policy %s, want the class's %s", pv.Spec.PersistentVolumeReclaimPolicy, retain)
	}
}

func TestProvisionRefuses(t *testing.T) {
	block := v1.PersistentVolumeBlock
	blockClaim := claim(v1.ReadWriteOnce)
	blockClaim.Spec.VolumeMode = &block
	noSize := claim(v1.ReadWriteOnce)
	noSize.Spec.Resources.Requests = nil
	for name, opts := range map[string]controller.ProvisionOptions{
		"no selected node": {PVName: "pvc-1", PVC: claim(v1.ReadWriteOnce)},
		"ReadWriteMany":    {PVName: "pvc-1", PVC: claim(v1.ReadWriteMany), SelectedNodeName: "n"},
		"block":            {PVName: "pvc-1", PVC: blockClaim, SelectedNodeName: "n"},
		"no size":          {PVName: "pvc-1", PVC: noSize, SelectedNodeName: "n"},
		"escaping name":    {PVName: "..", PVC: claim(v1.ReadWriteOnce), SelectedNodeName: "n"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			pv, state, err := (&localProvisioner{root: root}).Provision(context.Background(), opts)
			if err == nil || pv != nil || state != controller.ProvisioningFinished {
				t.Fatalf("want a final refusal, got pv=%v state=%v err=%v", pv, state, err)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Fatalf("a refused claim left %d entries under the root", len(entries))
			}
		})
	}
}

func localPV(name, path string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{}
	pv.Name = name
	pv.Spec.Local = &v1.LocalVolumeSource{Path: path}
	return pv
}

func TestDeleteRemovesOnlyItsDirectory(t *testing.T) {
	root := t.TempDir()
	p := &localProvisioner{root: root}
	dir := filepath.Join(root, "pvc-1")
	other := filepath.Join(root, "pvc-2")
	for _, d := range []string{filepath.Join(dir, "sub"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), localPV("pvc-1", dir)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("volume directory still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another volume's directory went too: %v", err)
	}
	// A directory already gone (deleted twice, or by hand) is not an error.
	if err := p.Delete(context.Background(), localPV("pvc-1", dir)); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestDeleteRefusesPathsOutsideItsVolume(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	p := &localProvisioner{root: root}
	for name, pv := range map[string]*v1.PersistentVolume{
		"outside the root":    localPV("pvc-1", outside),
		"the root itself":     localPV("pvc-1", root),
		"parent of the root":  localPV("pvc-1", filepath.Dir(root)),
		"dot-dot escape":      localPV("pvc-1", filepath.Join(root, "pvc-1", "..", "..", filepath.Base(outside))),
		"another volume":      localPV("pvc-1", filepath.Join(root, "pvc-2")),
		"nested under volume": localPV("pvc-1", filepath.Join(root, "pvc-1", "x")),
		"relative path":       localPV("pvc-1", "pvc-1"),
		"escaping PV name":    localPV("..", filepath.Join(root, "..")),
		"not a local volume":  {},
	} {
		t.Run(name, func(t *testing.T) {
			if err := p.Delete(context.Background(), pv); err == nil {
				t.Fatal("Delete accepted it")
			}
		})
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a directory outside the root was removed: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the root was removed: %v", err)
	}
}
