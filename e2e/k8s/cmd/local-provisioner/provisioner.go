package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// DefaultName is the provisioner name the local cluster's StorageClass uses.
const DefaultName = "sluice.dev/local"

// hostnameLabel is set on every node (kubelet's --hostname-override, kwok's
// node manifests) to the node's name, so it pins a volume to one node.
const hostnameLabel = "kubernetes.io/hostname"

// volumeMode is the mode of a fresh volume directory. kubelet hands a local
// volume to a pod's fsGroup (group owner + setgid + g+rwx) when the pod sets
// one, as sluice's operator does; a pod that only sets runAsUser gets no such
// help, so the directory is world-writable, as kind's local-path and
// minikube's hostpath provisioners make theirs. The volumes root above it is
// 0700, so no other user of the host can reach it.
const volumeMode os.FileMode = 0o777

// localProvisioner makes and removes volume directories under root and
// describes them as `local` PersistentVolumes. It implements
// controller.Provisioner.
type localProvisioner struct {
	root string // cleaned, absolute
}

var _ controller.Provisioner = (*localProvisioner)(nil)

// Provision makes the directory root/<pv name> and returns a PV for it pinned
// to the node the scheduler selected. A local volume cannot follow a pod to
// another node, so claims need a WaitForFirstConsumer class; anything else is
// refused for good (ProvisioningFinished) with a reason the claim's events show.
func (p *localProvisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	if opts.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, errors.New(
			"local volumes need the node the pod runs on: use a StorageClass with volumeBindingMode WaitForFirstConsumer")
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("local volumes are directories: volumeMode Block is not supported")
	}
	for _, m := range claim.Spec.AccessModes {
		if m != v1.ReadWriteOnce && m != v1.ReadWriteOncePod {
			return nil, controller.ProvisioningFinished, fmt.Errorf(
				"access mode %s is not supported: a local volume lives on one node (use ReadWriteOnce or ReadWriteOncePod)", m)
		}
	}
	size, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil, controller.ProvisioningFinished, errors.New("the claim requests no storage size")
	}
	path, err := volumePath(p.root, opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := os.MkdirAll(path, volumeMode); err != nil {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("volume directory: %w", err)
	}
	// MkdirAll's mode passes through the umask; set the intended one.
	if err := os.Chmod(path, volumeMode); err != nil {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("volume directory: %w", err)
	}

	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass != nil && opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	var mountOptions []string
	if opts.StorageClass != nil {
		mountOptions = opts.StorageClass.MountOptions
	}
	filesystem := v1.PersistentVolumeFilesystem
	pv := &v1.PersistentVolume{
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   claim.Spec.AccessModes,
			// Capacity is what the claim asked for: a directory has no size
			// of its own, and the binder needs capacity >= request.
			Capacity:     v1.ResourceList{v1.ResourceStorage: size},
			VolumeMode:   &filesystem,
			MountOptions: mountOptions,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				Local: &v1.LocalVolumeSource{Path: path},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: hostnameLabel, Operator: v1.NodeSelectorOpIn, Values: []string{opts.SelectedNodeName},
				}}}},
			}},
		},
	}
	pv.Name = opts.PVName
	klog.FromContext(ctx).Info("provisioned", "pv", pv.Name, "claim", claim.Namespace+"/"+claim.Name,
		"node", opts.SelectedNodeName, "path", path, "size", size.String())
	return pv, controller.ProvisioningFinished, nil
}

// Delete removes the directory of a PV this provisioner made. It refuses any
// path that is not exactly root/<pv name>, so a hand-made or edited PV can
// never make it remove something else on the host.
func (p *localProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return fmt.Errorf("PV %s is not a local volume", pv.Name)
	}
	want, err := volumePath(p.root, pv.Name)
	if err != nil {
		return err
	}
	if err := ownedPath(p.root, pv.Spec.Local.Path, want); err != nil {
		return err
	}
	if err := os.RemoveAll(want); err != nil {
		return fmt.Errorf("remove volume directory: %w", err)
	}
	klog.FromContext(ctx).Info("deleted", "pv", pv.Name, "path", want)
	return nil
}
