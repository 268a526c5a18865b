#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: kernel_facts
short_description: Report kernels, boot default, devel trees, nouveau, the NVIDIA module, DKMS and NVIDIA PCI devices
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
    description: Gathers these facts together with the GPU, kernel, limits, shm and NIC facts in one round trip, as
      the roles do.
description:
  - Running kernel, installed kernels (a kernel image in C(/boot) or C(/lib/modules/<release>)) and the kernel that
    boots next (C(grubby --default-kernel) on EL, otherwise the GRUB environment and C(grub.cfg), or BLS entries).
  - Whether C(/lib/modules/<release>/build) resolves (devel or headers installed) for the running, the default and
    every installed kernel.
  - nouveau - loaded (C(/proc/modules), C(/sys/module/nouveau)), blacklisted (C(blacklist nouveau) or
    C(install nouveau /bin/false) in C(/etc), C(/run), C(/usr/local/lib), C(/usr/lib) or C(/lib) C(modprobe.d), a file
    in an earlier directory hiding one of the same name later, or C(modprobe.blacklist=nouveau) on the kernel command
    line) and, with O(check_initramfs), inside the initramfs of the running kernel.
  - NVIDIA module - loaded, version and flavour from C(/proc/driver/nvidia/version) (open modules say
    C(Open Kernel Module)), otherwise from C(modinfo) (license C(Dual MIT/GPL) is open, C(NVIDIA) proprietary).
  - C(dkms status), old and new formats.
  - NVIDIA GPUs (PCI class 0x0300/0x0302) and NVSwitches (class 0x0680) from sysfs, without lspci, so a GPU shows even
    when nvidia-smi hangs.
  - NVLink 5 switch bridges (HGX B200 and newer, where the NVSwitches are not PCI devices of the host) - InfiniBand
    devices in C(/sys/class/infiniband) whose PCI VPD holds C(SW_MNG); ordinary ConnectX-7 NICs share their device id
    but not that field.
  - Secure Boot - from C(mokutil --sb-state), else the C(SecureBoot) EFI variable - and whether the DKMS signing key
    (C(/var/lib/dkms/mok.pub), or C(/var/lib/shim-signed/mok/MOK.der)) is enrolled (C(mokutil --test-key)).
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
options:
  root:
    description:
      - Read C(boot/), C(lib/modules/), C(etc/), C(proc/), C(sys/) and C(var/lib/dkms/) below this directory instead
        of C(/). With another root, grubby, dkms, lsinitrd and mokutil are not run (DKMS state comes from
        C(var/lib/dkms)) and modinfo is run with C(-b root -k <running>).
      - Another root must be a directory holding C(proc/sys/kernel/osrelease); the module fails naming it otherwise
        (it never reports the host's own kernel for it).
    type: path
    default: /
  check_initramfs:
    description:
      - Also list the running kernel's initramfs with C(lsinitrd) or C(lsinitramfs) and report whether it holds
        C(nouveau.ko) and which C(modprobe.d) files. Slow, hence off by default.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read kernel state
  gpufleet.nodeprep.kernel_facts:

- name: Headers must exist for the kernel that boots next
  ansible.builtin.assert:
    that:
      - ansible_facts.kernel_state.devel[ansible_facts.kernel_state.default | default(ansible_facts.kernel_state.running, true)]
    fail_msg: install kernel-devel/linux-headers for {{ ansible_facts.kernel_state.default }}

- name: Look inside the initramfs as well
  gpufleet.nodeprep.kernel_facts:
    check_initramfs: true
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(kernel_state).
  returned: always
  type: dict
  contains:
    kernel_state:
      description: Kernel and driver state.
      returned: always
      type: dict
      contains:
        running:
          description: The running kernel release (C(uname -r)).
          type: str
          sample: 5.14.0-503.14.1.el9_5.x86_64
        installed:
          description: Releases that have a kernel image, oldest first.
          type: list
          elements: str
        module_dirs:
          description: Every directory in C(/lib/modules), including leftovers of removed kernels.
          type: list
          elements: str
        default:
          description: The release that boots next, null when it cannot be told.
          type: str
        default_source:
          description: Where RV(ansible_facts.kernel_state.default) came from (V(grubby), a C(grub.cfg) path, V(bls)).
          type: str
        devel:
          description:
            - Release -> whether C(/lib/modules/<release>/build) resolves.
            - 'C([<release>]) (bool): Whether C(/lib/modules/<release>/build) resolves for this installed kernel
              release.'
          type: dict
          sample: {5.14.0-503.14.1.el9_5.x86_64: true}
        build_paths:
          description:
            - Release -> where C(build) resolves to, or null.
            - 'C([<release>]) (str): Where C(/lib/modules/<release>/build) resolves to, or V(null).'
          type: dict
        nouveau:
          description: nouveau state.
          type: dict
          contains:
            loaded:
              description: Whether nouveau is loaded.
              type: bool
            blacklisted:
              description: Whether a modprobe.d file or the kernel command line blacklists it.
              type: bool
            blacklist_files:
              description: The modprobe.d files that do.
              type: list
              elements: str
            blacklist_lines:
              description: The C(file:line) and text of each such line.
              type: list
              elements: str
            cmdline:
              description: Kernel command line words that blacklist it.
              type: list
              elements: str
            initramfs:
              description: Null unless O(check_initramfs).
              type: dict
              contains:
                image:
                  description: Path of the running kernel's initramfs image, or null when there is none.
                  type: str
                checked:
                  description: Whether the image could be listed.
                  type: bool
                module_present:
                  description: Whether C(nouveau.ko) is inside the image; null when not checked.
                  type: bool
                blacklist_files:
                  description: The C(modprobe.d) files inside the image that blacklist nouveau.
                  type: list
                  elements: str
                reason:
                  description: Why the image was not checked, or null.
                  type: str
        nvidia_module:
          description: NVIDIA kernel module.
          type: dict
          contains:
            loaded:
              description: Whether C(nvidia) is loaded.
              type: bool
            version:
              description: Its version (of the loaded module, else of the one modinfo finds).
              type: str
              sample: 570.86.15
            flavour:
              description: V(open), V(proprietary) or null.
              type: str
            source:
              description: Where version/flavour came from.
              type: str
        dkms:
          description: DKMS modules.
          type: list
          elements: dict
          sample: [{module: nvidia, version: 570.86.15, kernel: 5.14.0-503.14.1.el9_5.x86_64, arch: x86_64,
                    status: installed, detail: installed}]
          contains:
            module:
              description: DKMS module name.
              type: str
            version:
              description: Module version.
              type: str
            kernel:
              description: Kernel release it is built for; null for a module only added.
              type: str
            arch:
              description: Architecture; null for a module only added.
              type: str
            status:
              description: First word of the DKMS state (V(added), V(built), V(installed), ...).
              type: str
            detail:
              description: The whole state text C(dkms status) prints.
              type: str
        dkms_status:
          description:
            - What C(dkms status) said besides its listing - C(ran) (false with another O(root), or without dkms),
              C(rc), C(stderr) (its last 2000 characters), C(problems) (the lines that could not be read; they are
              left out of RV(ansible_facts.kernel_state.dkms) and do not fail the facts), C(missing) (no dkms).
            - dkms 3.0.x lists nothing past a module whose source is gone and still exits 0, saying so only on
              stderr (dkms-project/dkms issue 352), so an empty listing is not proof that no NVIDIA module is built.
          type: dict
          sample: {"ran": true, "rc": 0, "problems": [],
                   "stderr": "Error! Could not locate dkms.conf file.\nFile: /var/lib/dkms/nvidia/535.104.05/source/..."}
        dkms_tree:
          description:
            - The version trees of the NVIDIA DKMS modules (C(nvidia), C(nvidia-open), C(nvidia-current),
              C(nvidia-current-open)) under C(/var/lib/dkms), whatever C(dkms status) lists - C(module), C(version) and
              C(source) (whether its C(source) link resolves; a tree whose source is gone is a stale one).
          type: list
          elements: dict
          sample: [{"module": "nvidia", "version": "535.104.05", "source": false}]
        dkms_logs:
          description:
            - The C(make.log) a failed DKMS build of an NVIDIA module left, by C(<module>/<version>)
              (C(/var/lib/dkms/<module>/<version>/build/make.log); its first line names the kernel). Empty when no
              build failed.
          type: dict
          sample: {"nvidia/580.95.05": "DKMS (dkms-3.2.2) make.log for nvidia/580.95.05 for kernel 6.16.7-1.el9.elrepo.x86_64 (x86_64)\n..."}
        pci:
          description: NVIDIA PCI devices from sysfs.
          type: dict
          contains:
            gpus:
              description: One entry per GPU.
              type: list
              elements: dict
              contains: &pci_device
                bus_id:
                  description: PCI address as sysfs names it (C(0000:3b:00.0)).
                  type: str
                device_id:
                  description: PCI device ID (C(0x2901)).
                  type: str
                vendor_id:
                  description: PCI vendor ID (C(0x10de) for NVIDIA).
                  type: str
                class:
                  description: PCI class code.
                  type: str
            gpu_count:
              description: Number of GPUs.
              type: int
            nvswitches:
              description: One entry per NVSwitch.
              type: list
              elements: dict
              contains: *pci_device
            nvswitch_count:
              description: Number of NVSwitches.
              type: int
            nvlink5_bridges:
              description: C({ib_device, bus_id, device_id}) per NVLink 5 switch bridge (InfiniBand device whose VPD
                holds C(SW_MNG)).
              type: list
              elements: dict
              sample: [{ib_device: mlx5_8, bus_id: "0000:05:00.0", device_id: "0x1021"}]
              contains:
                ib_device:
                  description: InfiniBand device name (C(/sys/class/infiniband/<name>)).
                  type: str
                bus_id:
                  description: PCI address of the bridge function.
                  type: str
                device_id:
                  description: PCI device id (V(0x1021) on ConnectX-7).
                  type: str
            nvlink5_bridge_count:
              description: Number of NVLink 5 switch bridges.
              type: int
            nvswitch_fabric:
              description: How the NVSwitches show - V(nvlink5) (switch bridges, B200 and newer), V(pci) (NVIDIA PCI
                bridges, Hopper) or V(none).
              type: str
              choices: [none, pci, nvlink5]
        secure_boot:
          description: Secure Boot state.
          type: dict
          contains:
            enabled:
              description: V(true), V(false), or null when it cannot be told.
              type: bool
            source:
              description: Where RV(ansible_facts.kernel_state.secure_boot.enabled) came from.
              type: str
            dkms_mok:
              description: C(path) of the DKMS signing key (null when there is none) and whether it is C(enrolled)
                (null when mokutil cannot tell).
              type: dict
              contains:
                path:
                  description: Path of the DKMS signing certificate, or V(null) when there is none.
                  type: str
                enrolled:
                  description: Whether that key is enrolled as a MOK; V(null) when mokutil cannot tell.
                  type: bool
        os:
          description:
            - The OS facts the kernel and nvidia_driver roles read, named as Ansible's C(setup) names them, from
              C(/etc/os-release) (and C(/etc/debian_version) on Debian), so that the roles need no C(setup) call.
            - Null on a distribution the roles do not support. With O(root) other than C(/), C(architecture) is null.
          type: dict
          sample: {"os_family": "RedHat", "distribution": "Rocky", "distribution_version": "9.6",
                   "distribution_major_version": "9", "architecture": "x86_64"}
        driver_node:
          description:
            - What the nvidia_driver plan reads on the node besides these facts - EL C(repos), C(versionlock),
              C(versionlock_plugin), C(module_stream); Debian family C(apt_sources_content), C(apt_keyring_present),
              C(apt_holds); both C(packages) (the installed NVIDIA packages, C(dkms), C(nvlsm), C(epel-release) and
              the versionlock plugin, each a list of C(epoch), C(version), C(release), C(arch)).
            - Debian family, where Ubuntu's NVIDIA module packages (C(linux-modules-nvidia-*)) are installed, also
              C(apt_candidates) - the candidate version (null - none) of the module package of each installed kernel
              and of each kernel flavour's module meta package, from one C(apt-cache policy) over the apt lists as
              they are; null when apt-cache could not be run. The kernel role reads it before a reboot.
            - The nvidia_driver role's plan (M(gpufleet.nodeprep.node_plan)) reads it on the controller.
            - Null with O(root) other than C(/), on a distribution the roles do not support, or when the package
              database cannot be read (then RV(ansible_facts.kernel_state.warnings) says why).
          type: dict
        packages:
          description:
            - The installed kernel packages, from the same package list as RV(ansible_facts.kernel_state.driver_node)
              (EL C(kernel), C(kernel-core), C(kernel-devel) and the ELRepo C(kernel-lt*), C(kernel-ml*); Debian
              family C(linux-image-*), C(linux-headers-*), C(linux-generic*)), each a list of releases, oldest first.
            - On EL a release is C(<version>-<release>.<arch>), what C(uname -r) prints for that kernel; on Debian and
              Ubuntu the package version.
            - The kernel role's plan (M(gpufleet.nodeprep.node_plan)) picks the kernel that must boot next from it.
            - Null when RV(ansible_facts.kernel_state.driver_node) is null.
          type: dict
          sample: {"kernel-core": ["5.14.0-570.el9.x86_64", "5.14.0-611.el9.x86_64"],
                   "kernel-lt-core": ["6.1.100-1.el9.elrepo.x86_64"]}
        warnings:
          description: Commands that failed without making the facts useless.
          type: list
          elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import run_facts_module
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import KernelError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._kernel_state import collect_kernel_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type='path', default='/'),
            check_initramfs=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    run_facts_module(module, 'kernel_state',
                     lambda: collect_kernel_facts(module, root=module.params['root'],
                                                  check_initramfs=module.params['check_initramfs']),
                     (KernelError,), warn_keys=('warnings',))


if __name__ == '__main__':
    main()
