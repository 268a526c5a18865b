# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/rules/_readiness.py: evaluate() over realistic fact sets, the helpers, the report."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_fabric
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _topology
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
                        'fixtures')
RUNNING = F.RUNNING
ALL_GPUS = ', '.join(F.SYSFS_IDS)


def statuses(checks):
    return [(c['id'], c['status'], c['observed']) for c in checks]


def by_id(checks, check_id):
    return [c for c in checks if c['id'] == check_id][0]


# ---------------------------------------------------------------------------------------------------------------------
# whole fact sets

# What a node outside any IMEX domain (nodeprep_imex_domain_group unset, the imex role's default) reports.
NOT_IN_IMEX_DOMAIN = {'imex.domain': 'skip'}

CONVERGED = [
    ('kernel.devel_matched', 'pass', 'devel/headers present for {0} (/lib/modules/{0}/build)'.format(RUNNING)),
    ('driver.nouveau_blacklisted', 'pass', 'blacklisted in /etc/modprobe.d/nvidia-installer-disable-nouveau.conf, '
                                           'not loaded'),
    ('driver.loaded', 'pass', 'driver 580.105.08 loaded (open modules)'),
    ('driver.open_modules', 'pass', 'open modules loaded'),
    ('driver.persistenced', 'pass', 'nvidia-persistenced: active, enabled'),
    ('gpu.count', 'pass', 'nvidia-smi: 8, PCI bus: 8'),
    ('gpu.power_limit', 'pass', 'all 8 GPUs at 700 W'),
    ('gpu.clocks', 'pass', 'within the supported range on all 8 GPUs; the locks recorded this boot show in the '
                           'current clocks'),
    ('gpu.health', 'pass', 'all 8 GPUs healthy; no Xid in journalctl -k -b 0 (last 20000 lines)'),
    ('gpu.throttle', 'pass', 'no clock slowdown on 8 GPUs'),
    ('pci.link', 'pass', 'all 8 GPUs at x16 Gen5'),
    ('nvlink.links', 'pass', '8 of 8 GPUs with all 18 NVLinks active (NVIDIA B200); error counters within the '
                             'thresholds on 8 GPUs'),
    ('gpu.remapped_rows', 'pass', 'none pending or failed on 8 GPUs; 0 rows uncorrectable remapped'),
    ('gpu.mig', 'pass', 'MIG disabled on 8 GPUs'),
    ('gpu.vbios', 'pass', 'VBIOS 97.00.FA.00.09 on 8 GPUs'),
    ('memlock.users', 'pass', 'root unlimited/unlimited, train unlimited/unlimited'),
    ('memlock.services', 'pass', 'default unlimited/unlimited, slurmd unlimited/unlimited'),
    ('shm.size', 'pass', 'live 716.0 GiB, fstab 716.0 GiB'),
    ('nccl.config', 'pass', '/etc/nccl.conf: as wanted'),
    ('nic.offload', 'pass', 'as wanted on ens3f0np0'),
    ('fabric.manager', 'pass', '2 NVSwitches on the PCI bus; nvidia-fabricmanager: active, enabled'),
    ('gpu.fabric', 'pass', 'all 8 GPUs Completed/Success'),
    ('gpu.topology', 'pass', '28 GPU pairs at NV18 (B200 with NVSwitches: NV18); 8 of 8 GPUs with a NIC at PIX/PXB'),
    ('gpu.dcgm_diag', 'pass', 'DCGM 4.1.1: 8 results of diagnostic (discovery not read); all passed'),
    # issue 30: the path in use is named (the open modules on Linux 5.14 serve DMA-BUF)
    ('rdma.peer_memory', 'pass', 'DMA-BUF (kernel ' + RUNNING + ', open kernel modules); nvidia_peermem loaded'),
    ('pci.acs', 'pass', 'no PCIe switch between the 9 GPUs/ConnectX devices and their root ports'),
    ('kernel.iommu', 'pass', 'IOMMU off: no IOMMU group in /sys/kernel/iommu_groups (cmdline: iommu=pt)'),
    # An HGX node is not in an IMEX domain (the imex role is opt-in): the check does not apply.
    ('imex.domain', 'skip', 'nodeprep_imex_domain_group is not set'),
    ('perf.tools', 'pass', 'in place: /opt/nodeprep/perf/bin/all_reduce_perf -> the build, '
                           '/opt/nodeprep/perf/bin/nvbandwidth -> the build'),
    ('perf.allreduce', 'pass', 'mean bus bandwidth 820.0 GB/s at 1 GiB to 16 GiB over 8 GPUs; no wrong value'),
    ('perf.nvbandwidth', 'pass', 'host_to_device_memcpy_ce min 55.0 GB/s (GPU 0); device_to_host_memcpy_ce min 55.5 '
                                 'GB/s (GPU 0); device_to_device_memcpy_read_ce min 750.0 GB/s (GPU 0 -> GPU 1)'),
]

FRESH = [
    # The kernel role's plan: the devel package of the kernel that boots next is missing.
    ('kernel.devel_matched', 'fail', 'devel: /lib/modules/{0}/build does not resolve: kernel-devel-uname-r = {0} is '
                                     'not installed'.format(RUNNING)),
    ('driver.nouveau_blacklisted', 'fail', 'nouveau is loaded (reboot after blacklisting); nouveau is not blacklisted'),
    ('driver.loaded', 'fail', 'the nvidia kernel module is not loaded; nvidia-smi failed: nvidia-smi not found'),
    ('driver.open_modules', 'fail', 'no nvidia kernel module loaded'),
    ('driver.persistenced', 'fail', 'nvidia-persistenced: not installed'),
    ('gpu.count', 'fail', 'nvidia-smi: failed, PCI bus: 8; missing from nvidia-smi: ' + ALL_GPUS),
    # A state that could not be read fails: nvidia-smi is missing on a node whose PCI bus shows 8 GPUs.
    # (the boot unit's link is missing too: the unit is not installed)
    ('gpu.power_limit', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found; from what was read: '
                                '/etc/systemd/system/multi-user.target.wants/nodeprep-gpu-settings.service: missing '
                                '(the settings are lost at the next reboot)'),
    ('gpu.clocks', 'fail', '/etc/systemd/system/multi-user.target.wants/nodeprep-gpu-settings.service: missing '
                           '(the settings are lost at the next reboot)'),
    ('gpu.health', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    # The memlock role's plan (nothing written yet): its files are missing.
    ('gpu.throttle', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('pci.link', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('nvlink.links', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('gpu.remapped_rows', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('gpu.mig', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('gpu.vbios', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('memlock.users', 'fail', 'root 8192/8192, train 8192/8192; /etc/security/limits.d/90-nodeprep-memlock.conf: '
                              'missing'),
    ('memlock.services', 'fail', 'default 8192/8192, slurmd 8192/8192; /etc/systemd/system.conf.d: missing; '
                                 '/etc/systemd/system.conf.d/90-nodeprep-memlock.conf: missing; '
                                 '/etc/systemd/system/slurmd.service.d: missing; '
                                 '/etc/systemd/system/slurmd.service.d/90-nodeprep-memlock.conf: missing'),
    ('shm.size', 'fail', 'live 1007.0 GiB, no fstab line (the next boot gives the tmpfs default, half of RAM: '
                         '1007.0 GiB); no /dev/shm line in fstab'),
    ('nccl.config', 'fail', '/etc/nccl.conf: missing'),
    # The live feature, and what NetworkManager's connection lacks to keep it (read in the gather; issue 27).
    ('nic.offload', 'fail', 'ens3f0np0: generic-receive-offload is on; ens3f0np0: NetworkManager connection System '
                            'ens3f0np0: ethtool.feature-gro is not set, wanted off; ens3f0np0: NetworkManager '
                            'connection System ens3f0np0: ethtool.feature-lro is not set, wanted off'),
    ('fabric.manager', 'fail', '2 NVSwitches on the PCI bus; nvidia-fabricmanager: not installed'),
    ('gpu.fabric', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('gpu.topology', 'fail', 'could not be read: nvidia-smi failed: nvidia-smi not found'),
    ('gpu.dcgm_diag', 'skip', 'not run: nodeprep_readiness_dcgm is false (it takes about a minute)'),
    # The distribution's inbox RDMA stack: no peer-memory API.
    ('rdma.peer_memory', 'fail', 'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX '
                                 '0000:8d:00.0; the RDMA stack '
                                 'lacks ib_register_peer_memory_client, ib_unregister_peer_memory_client '
                                 '(/proc/kallsyms), so modprobe nvidia_peermem fails with "Unknown symbol '
                                 'ib_register_peer_memory_client"; DMA-BUF cannot serve here (the loaded nvidia '
                                 'module is of unknown flavour, not the open kernel modules)'),
    ('pci.acs', 'fail', 'ACS redirects peer traffic through the root complex at switch downstream port '
                        '0000:8e:01.0 (above GPU 0000:8f:00.0): ACSCtl ReqRedir+ CmpltRedir+'),
    ('kernel.iommu', 'fail', 'IOMMU translating DMA for GPU 0000:8f:00.0 (group type DMA-FQ); cmdline: no IOMMU '
                             'parameter'),
    ('imex.domain', 'skip', 'nodeprep_imex_domain_group is not set'),
    # Without a driver the perf_tools plan cannot tell the CUDA toolkit; the gather ran neither tool (no GPU listed).
    ('perf.tools', 'fail', 'perf_tools on gpu-a01: cannot tell which CUDA toolkit builds all_reduce_perf, nvbandwidth '
                           '(nvidia-smi: nvidia-smi not found); set nodeprep_perf_tools_cuda_version (such as 12.8).'),
    ('perf.allreduce', 'fail', 'all_reduce_perf not run: nvidia-smi listed no GPU'),
    ('perf.nvbandwidth', 'fail', 'nvbandwidth not run: nvidia-smi listed no GPU'),
]


def test_converged_node_passes_every_check():
    facts, settings, probe = F.converged()
    checks = F.evaluate(facts, settings, probe)
    assert statuses(checks) == CONVERGED
    assert [c['id'] for c in checks] == list(r.CHECK_IDS)
    assert all(c['remedy'] == r.REMEDIES[c['id']] for c in checks)
    assert r.summarize(checks) == {'pass': 30, 'warn': 0, 'fail': 0, 'skip': 1, 'status': 'pass'}


def test_freshly_provisioned_node():
    facts, settings, probe = F.fresh()
    checks = F.evaluate(facts, settings, probe)
    assert statuses(checks) == FRESH
    assert by_id(checks, 'driver.open_modules')['expected'] == \
        'open kernel modules (PCI device ID 0x2901 is Blackwell or newer)'
    assert r.summarize(checks) == {'pass': 0, 'warn': 0, 'fail': 29, 'skip': 2, 'status': 'fail'}


def test_expected_texts_of_the_converged_node():
    facts, settings, probe = F.converged()
    expected = dict((c['id'], c['expected']) for c in F.evaluate(facts, settings, probe))
    assert expected == {
        'kernel.devel_matched': 'devel/headers installed for the kernel that boots next, ' + RUNNING,
        'driver.nouveau_blacklisted': 'nouveau blacklisted and not loaded',
        'driver.loaded': 'a driver of branch 580 loaded and answering',
        'driver.open_modules': 'open kernel modules (nvidia-smi reports GPU 0, 1, 2, 3, 4, 5, 6, 7 as Blackwell)',
        'driver.persistenced': 'nvidia-persistenced enabled and running',
        'gpu.count': '8 GPUs in nvidia-smi and on the PCI bus (nodeprep_expected_gpus)',
        'gpu.power_limit': 'power limit 70% on every GPU (nodeprep_gpu_settings_power_limit)',
        'gpu.clocks': 'GPU clocks locked to 1500-1965 MHz; re-applied at boot by nodeprep-gpu-settings.service',
        'gpu.health': 'no pending page retirement, no uncorrectable ECC error, no Xid event in the kernel log of '
                      'this boot',
        'gpu.throttle': 'no GPU with HW Power Brake Slowdown, HW Slowdown, HW Thermal Slowdown, SW Thermal Slowdown '
                        'Active (clock event reasons; SW Power Cap, Idle and the clock settings are not faults)',
        'pci.link': 'every GPU at its full PCIe width (x16 on HGX boards); a lower generation only while idle',
        'nvlink.links': "the board's NVLinks active on every GPU, at their speed; NVLink error counters within the "
                        'thresholds',
        'gpu.remapped_rows': 'no row remapping pending or failed on any GPU; uncorrectable remapped rows within the '
                             'threshold',
        'gpu.mig': 'MIG disabled (current and pending) on every GPU (nodeprep_readiness_mig)',
        'gpu.vbios': 'one VBIOS version across the GPUs of a node',
        'memlock.users': 'memlock soft and hard unlimited for root, train',
        'memlock.services': 'unlimited for systemd DefaultLimitMEMLOCK, slurmd LimitMEMLOCK',
        'shm.size': '/dev/shm tmpfs of 716.0 GiB (nodeprep_shm_size), live and in fstab',
        'nccl.config': '/etc/nccl.conf with NCCL_DEBUG=WARN, NCCL_IB_TIMEOUT=22, NCCL_SOCKET_IFNAME=ens3f0np0; '
                       'only names NCCL reads',
        'nic.offload': 'generic-receive-offload off, large-receive-offload off on the NICs chosen by name, driver or '
                       'network',
        'fabric.manager': 'nvidia-fabricmanager active and enabled (on NVLink 5 systems it starts NVLSM itself); '
                          "the GPUs' fabric state is gpu.fabric's",
        'gpu.fabric': _gpu_fabric.EXPECTED,
        'gpu.topology': _topology.EXPECTED,
        'gpu.dcgm_diag': 'dcgmi diag -r 1: every test passes (or is skipped) on every GPU, DCGM\'s test summaries pass, '
                         'not every test skipped, and DCGM sees every GPU nvidia-smi lists',
        'rdma.peer_memory': 'DMA-BUF usable (Linux 5.12 or later, the open kernel modules, an RDMA stack with DMA-BUF), '
                            'else nvidia_peermem loaded',
        'pci.acs': 'ACS redirect off (ACSCtl ReqRedir- CmpltRedir-) on the PCIe switch downstream ports above the '
                   'GPUs and ConnectX devices',
        'kernel.iommu': 'IOMMU off or in passthrough (iommu=pt) for the GPUs and ConnectX devices',
        'imex.domain': 'not managed (nodeprep_imex_domain_group is not set)',
        'perf.tools': 'all_reduce_perf, nvbandwidth built (or given) and linked at /opt/nodeprep/perf/bin/all_reduce_perf, '
                      '/opt/nodeprep/perf/bin/nvbandwidth',
        # The table's B200 figure and its source; nvbandwidth's from the setting (the table has none for B200).
        'perf.allreduce': 'all_reduce_perf over all 8 GPUs: mean bus bandwidth at 1 GiB to 16 GiB >= 440 GB/s (b200: '
                          'oci-hpc); no wrong or out-of-bounds value',
        'perf.nvbandwidth': 'nvbandwidth, every cell: host_to_device_memcpy_ce >= 48 GB/s; device_to_host_memcpy_ce >= '
                            '48 GB/s; device_to_device_memcpy_read_ce >= 600 GB/s (b200: setting)',
    }


# ---------------------------------------------------------------------------------------------------------------------
# one fault at a time on the converged node: that check changes, every other one still passes


def _gpus(state):
    return state[0]['nvidia']['gpus']


def _set(path, value):
    """Mutation setting facts/settings/probe[path...] = value (path starts with 0, 1 or 2)."""
    def mutate(state):
        target = state[path[0]]
        for key in path[1:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _gpu_set(index, key, value):
    def mutate(state):
        _gpus(state)[index][key] = value
    return mutate


def _drop_gpu(index):
    """A GPU nvidia-smi no longer lists: the gather runs the performance gates on the GPUs it lists (CUDA sees the
    same ones), so their outputs have one GPU less."""
    def mutate(state):
        del _gpus(state)[index]
        count = len(_gpus(state))
        state[0][r.PERF_FACT] = {
            'all_reduce_perf': F.perf_run('all_reduce_perf', F.allreduce_output(count, 820.0)),
            'nvbandwidth': F.perf_run('nvbandwidth', F.nvbandwidth_output(count, 55.0, 55.5, 750.0))}
    return mutate


def _perf_not_run(why):
    """The gather ran neither tool (collect/_health.read_perf: nvidia-smi listed no GPU)."""
    def mutate(state):
        for run in state[0][r.PERF_FACT].values():
            run.update(rc=None, stdout='', stderr=why)
    return mutate


def _drop_pci(index):
    def mutate(state):
        pci = state[0]['kernel_state']['pci']
        del pci['gpus'][index]
        pci['gpu_count'] -= 1
    return mutate


def _nvlink_pair(a, b, cell):
    def mutate(state):
        links = state[0]['nvidia']['topology']['matrix']['links']
        links[a][b] = links[b][a] = cell
    return mutate


def _xid(lines):
    return _set((2, 'kernel_log', 'lines'), lines)


def _unit(name, **states):
    def mutate(state):
        state[2]['services'][name].update(states)
    return mutate


def _both(*mutations):
    def mutate(state):
        for m in mutations:
            m(state)
    return mutate


XID79 = ('2025-06-02T10:11:12+0000 node07 kernel: NVRM: Xid (PCI:0000:c4:00): 79, pid=\'<unknown>\', name=<unknown>, '
         'GPU has fallen off the bus.')
XID13 = ('2025-06-02T10:11:12+0000 node07 kernel: NVRM: Xid (PCI:0000:8f:00): 13, pid=4242, name=python3, '
         'Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address')

FAULTS = [
    ('devel missing for the next boot kernel',
     _both(_set((0, 'kernel_state', 'default'), '5.14.0-611.el9.x86_64'),
           _set((0, 'kernel_state', 'installed'), [RUNNING, '5.14.0-611.el9.x86_64'])),
     'kernel.devel_matched', 'fail',
     'devel: /lib/modules/5.14.0-611.el9.x86_64/build does not resolve: kernel-devel-uname-r = 5.14.0-611.el9.x86_64 '
     'is not installed; dkms: nvidia-open/580.105.08 not built for 5.14.0-611.el9.x86_64; built before the node may '
     'boot it; reboot: running ' + RUNNING + ', 5.14.0-611.el9.x86_64 boots next',
     # No NVIDIA DKMS build for the kernel that boots next: the driver plan warns (the nvidia_driver role builds it).
     {'driver.loaded': 'warn'}),
    # The pending reboot is the kernel role's work (it reboots when allowed): the check warns until then (issue 27).
    # DKMS built the driver for it when its devel package came (the kernel role's check before the reboot, R24).
    ('reboot pending into a kernel with devel',
     _both(_set((0, 'kernel_state', 'default'), '5.14.0-611.el9.x86_64'),
           _set((0, 'kernel_state', 'devel'), {RUNNING: True, '5.14.0-611.el9.x86_64': True}),
           _set((0, 'kernel_state', 'dkms'), [F.dkms_entry(RUNNING), F.dkms_entry('5.14.0-611.el9.x86_64')])),
     'kernel.devel_matched', 'warn',
     'devel/headers present for 5.14.0-611.el9.x86_64 (/lib/modules/5.14.0-611.el9.x86_64/build); reboot: running '
     + RUNNING + ', 5.14.0-611.el9.x86_64 boots next'),
    ('ELRepo kernel wanted, distro kernel running',
     _set((1, 'nodeprep_kernel_source'), 'elrepo-ml'),
     'kernel.devel_matched', 'fail',
     'install: kernel-ml, kernel-ml-devel (Rocky 9.6 has no kernel installed of nodeprep_kernel_source=elrepo-ml); '
     'devel: no kernel of the chosen source is installed yet (kernel-ml), so neither is its devel/headers package; '
     'dkms: nvidia-open/580.105.08 not built for (newest kernel-ml to be installed); built before the node may boot '
     'it; kernel: (newest kernel-ml to be installed) must boot next (the boot loader default is ' + RUNNING + '); '
     'reboot: running ' + RUNNING + ', (newest kernel-ml to be installed) boots next'),
    ('nouveau blacklisted but still loaded',
     _set((0, 'kernel_state', 'nouveau', 'loaded'), True),
     'driver.nouveau_blacklisted', 'fail', 'nouveau is loaded (reboot after blacklisting)'),
    ('wrong driver branch',
     _set((1, 'nodeprep_nvidia_driver_branch'), '590'),
     'driver.loaded', 'fail', 'driver 580.105.08 is loaded, branch 590 wanted'),
    ('kernel module and user space differ after an update',
     _set((0, 'kernel_state', 'nvidia_module', 'version'), '580.95.05'),
     'driver.loaded', 'fail', 'kernel module 580.95.05 differs from user-space driver 580.105.08 (reboot or reload)'),
    ('proprietary modules on Blackwell',
     _set((0, 'kernel_state', 'nvidia_module', 'flavour'), 'proprietary'),
     'driver.open_modules', 'fail', 'proprietary modules loaded; Blackwell and newer GPUs need the open ones '
                                    '(nvidia-smi reports GPU 0, 1, 2, 3, 4, 5, 6, 7 as Blackwell; PCI device ID 0x2901 '
                                    'is Blackwell or newer)'),
    ('daemon stopped, legacy persistence mode on',
     _unit('nvidia-persistenced.service', active_state='inactive', unit_file_state='disabled'),
     'driver.persistenced', 'warn',
     'nvidia-persistenced: inactive, disabled; persistence mode set by the legacy nvidia-smi -pm 1 on all GPUs'),
    ('daemon running but not enabled at boot',
     _unit('nvidia-persistenced.service', unit_file_state='disabled'),
     'driver.persistenced', 'fail', 'nvidia-persistenced: active, disabled (not started at boot)'),
    ('a GPU fell out of nvidia-smi',
     _drop_gpu(4),
     'gpu.count', 'fail', 'nvidia-smi: 7, PCI bus: 8; missing from nvidia-smi: 0000:c4:00.0'),
    ('a GPU fell off the PCI bus',
     _both(_drop_gpu(4), _drop_pci(4)),
     'gpu.count', 'fail', 'nvidia-smi: 7, PCI bus: 7; the PCI bus shows 7 of 8 GPUs'),
    ('nvidia-smi hangs',
     _both(_set((0, 'nvidia'), {'present': True, 'error': 'nvidia-smi timed out after 60 s', 'gpus': []}),
           _perf_not_run('not run: nvidia-smi listed no GPU')),
     'gpu.count', 'fail', 'nvidia-smi: failed, PCI bus: 8; missing from nvidia-smi: ' + ALL_GPUS,
     # The gates ran nothing (no GPU listed): they fail saying so.
     {'driver.loaded': 'fail', 'gpu.power_limit': 'fail', 'gpu.clocks': 'fail', 'gpu.health': 'fail',
      'gpu.fabric': 'fail', 'gpu.topology': 'fail', 'gpu.throttle': 'fail', 'pci.link': 'fail', 'nvlink.links': 'fail',
      'gpu.remapped_rows': 'fail', 'gpu.mig': 'fail', 'gpu.vbios': 'fail', 'perf.allreduce': 'fail',
      'perf.nvbandwidth': 'fail',
      # The perf_tools plan cannot tell the CUDA toolkit without nvidia-smi (it refuses the node, as its role would).
      'perf.tools': 'fail'}),
    ('power limit left at the default',
     _gpu_set(2, 'power_limit_w', 1000.0),
     'gpu.power_limit', 'fail', 'all 8 GPUs at 1000 / 700 W; GPU 2: power limit 1000 W, wanted 700 W'),
    ('re-apply unit disabled: power limit lost at reboot',
     _both(_unit('nodeprep-gpu-settings.service', unit_file_state='disabled'),
           _set((1, 'nodeprep_gpu_settings_locked_gpu_clocks'), None)),
     'gpu.power_limit', 'warn',
     'all 8 GPUs at 700 W; /etc/systemd/system/multi-user.target.wants/nodeprep-gpu-settings.service: missing (the '
     'settings are lost at the next reboot)',
     {'gpu.clocks': 'skip'}),
    ('re-apply unit failed',
     _unit('nodeprep-gpu-settings.service', active_state='failed'),
     'gpu.clocks', 'fail', 'within the supported range on all 8 GPUs; the locks recorded this boot show in the current '
                           'clocks; nodeprep-gpu-settings.service failed at its last run (journalctl -u '
                           'nodeprep-gpu-settings.service); a run of the role applies the settings now',
     {'gpu.power_limit': 'warn'}),
    ('locked clock above the maximum',
     _set((1, 'nodeprep_gpu_settings_locked_gpu_clocks'), {'min': 1500, 'max': 2100}),
     # the role fails on the first GPU it cannot lock (the plan's error, from _gpu_settings.check_clock_range)
     'gpu.clocks', 'fail', 'GPU 0 (00000000:8F:00.0) on node1: locked_gpu_clocks 1500-2100 MHz is outside the '
                           'supported range up to 1965 MHz'),
    # Remapped rows moved from gpu.health to gpu.remapped_rows (testbed fault rows-pending).
    ('pending row remapping (testbed fault rows-pending)',
     _gpu_set(5, 'remapped_rows', {'pending': True, 'failure': False, 'correctable': 0, 'uncorrectable': 1}),
     'gpu.remapped_rows', 'fail', 'GPU 5 (00000000:C5:00.0): row remapping pending (reset the GPU or reboot to apply '
                                  'it)'),
    ('row remapping failed',
     _gpu_set(2, 'remapped_rows', {'pending': False, 'failure': True, 'correctable': 3, 'uncorrectable': 7}),
     'gpu.remapped_rows', 'fail', 'GPU 2 (00000000:96:00.0): row remapping failed (replace the GPU)'),
    ('more uncorrectable remapped rows than DCGM allows',
     _gpu_set(3, 'remapped_rows', {'pending': False, 'failure': False, 'correctable': 0, 'uncorrectable': 513}),
     'gpu.remapped_rows', 'fail', 'GPU 3 (00000000:97:00.0): 513 rows remapped for uncorrectable errors, above 512 '
                                  'rows (azure-nhc)'),
    ('uncorrectable remapped rows over a site threshold',
     _both(_gpu_set(3, 'remapped_rows', {'pending': False, 'failure': False, 'correctable': 0, 'uncorrectable': 9}),
           _set((1, 'nodeprep_readiness_thresholds'), {'remapped_rows_uncorrectable_max': 8})),
     'gpu.remapped_rows', 'fail', 'GPU 3 (00000000:97:00.0): 9 rows remapped for uncorrectable errors, above 8 rows '
                                  '(nodeprep_readiness_thresholds.remapped_rows_uncorrectable_max)'),
    ('HW Power Brake Slowdown (testbed fault hw-slowdown)',
     _both(_gpu_set(7, 'clocks_event_reasons', dict(F.gpu(7)['clocks_event_reasons'], gpu_idle=False,
                                                    hw_slowdown=True, hw_power_brake_slowdown=True)),
           _gpu_set(7, 'clocks', {'graphics_mhz': 491, 'sm_mhz': 491, 'mem_mhz': 3996, 'video_mhz': 660})),
     'gpu.throttle', 'fail', 'GPU 7 (00000000:CC:00.0): HW Power Brake Slowdown, HW Slowdown Active (graphics clock '
                             '491 of 1965 MHz)',
     # The clocks locked this boot no longer show in the current clocks: the gpu_settings plan warns (not a fail).
     {'gpu.clocks': 'warn'}),
    ('SW Thermal Slowdown',
     _gpu_set(1, 'clocks_event_reasons', dict(F.gpu(1)['clocks_event_reasons'], gpu_idle=False,
                                              sw_thermal_slowdown=True)),
     'gpu.throttle', 'fail', 'GPU 1 (00000000:90:00.0): SW Thermal Slowdown Active (graphics clock 1965 of 1965 '
                             'MHz)'),
    ('SW Power Cap only: the power limit, a setting',
     _gpu_set(1, 'clocks_event_reasons', dict(F.gpu(1)['clocks_event_reasons'], gpu_idle=False, sw_power_cap=True,
                                              applications_clocks_setting=True)),
     'gpu.throttle', 'pass', 'no clock slowdown on 8 GPUs'),
    ('PCIe link trained at x8 (testbed fault pcie-downtrained)',
     _gpu_set(7, 'pcie', dict(F.gpu(7)['pcie'], width_current=8)),
     'pci.link', 'fail', 'GPU 7 (00000000:CC:00.0): PCIe link x8 (Gen5), below x16 lanes (model b200, source '
                         'captures)'),
    ('PCIe at Gen1 with full width on an idle GPU: power saving',
     _gpu_set(4, 'pcie', dict(F.gpu(4)['pcie'], gen_current=1)),
     'pci.link', 'pass', '8 GPUs: x16 Gen1, x16 Gen5; GPU 4 (00000000:C4:00.0) at Gen1 of Gen5 while idle (power '
                         'saving)'),
    ('PCIe at Gen4 with full width on a busy GPU',
     _both(_gpu_set(4, 'pcie', dict(F.gpu(4)['pcie'], gen_current=4)),
           _gpu_set(4, 'clocks_event_reasons', dict(F.gpu(4)['clocks_event_reasons'], gpu_idle=False))),
     'pci.link', 'warn', 'GPU 4 (00000000:C4:00.0): PCIe Gen4, below its Gen5 maximum while not idle (x16; the '
                         'host<->device bandwidth gate judges it under load)'),
    ('PCIe x8 accepted by the site',
     _both(_gpu_set(7, 'pcie', dict(F.gpu(7)['pcie'], width_current=8)),
           _set((1, 'nodeprep_readiness_thresholds'), {'pcie_width': 8})),
     'pci.link', 'pass', '8 GPUs: x16 Gen5, x8 Gen5'),
    ('two NVLinks inactive (testbed fault nvlink-inactive)',
     _set((0, 'nvidia', 'nvlink'), F.nvlink(down={7: (3, 7)})),
     'nvlink.links', 'fail', 'GPU 7 (00000000:CC:00.0): links 3, 7 inactive; 16 of 18 links active (oci-hpc)'),
    ('all NVLinks of a GPU inactive',
     _set((0, 'nvidia', 'nvlink'), F.nvlink(down={2: 'all'})),
     'nvlink.links', 'fail', 'GPU 2 (00000000:96:00.0): all NVLinks inactive, 18 wanted (oci-hpc)'),
    ('NVLink recovery errors since the driver loaded',
     _set((0, 'nvidia', 'nvlink'), F.nvlink(counts={(6, 11, 'Recovery Errors'): 2})),
     'nvlink.links', 'fail', 'GPU 6 (00000000:CB:00.0) link 11: 2 Recovery Errors, above 0 (dcgm-health; counted '
                             'since the driver loaded)'),
    ('NVLink CRC errors: no count threshold, a warning',
     _set((0, 'nvidia', 'nvlink'), F.nvlink(counts={(0, 1, 'CRC Errors'): 40})),
     'nvlink.links', 'warn', '8 of 8 GPUs with all 18 NVLinks active (NVIDIA B200); error counters within the '
                             'thresholds on 8 GPUs; GPU 0 (00000000:8F:00.0) link 1: 40 CRC Errors since the driver '
                             'loaded (no threshold: DCGM judges CRC errors per second)'),
    ('NVLink CRC errors over a site threshold',
     _both(_set((0, 'nvidia', 'nvlink'), F.nvlink(counts={(0, 1, 'CRC Errors'): 40})),
           _set((1, 'nodeprep_readiness_thresholds'), {'nvlink_crc_errors_max': 10})),
     'nvlink.links', 'fail', 'GPU 0 (00000000:8F:00.0) link 1: 40 CRC Errors, above 10 '
                             '(nodeprep_readiness_thresholds.nvlink_crc_errors_max; counted since the driver loaded)'),
    ('nvidia-smi nvlink -s failed',
     _set((0, 'nvidia', 'nvlink', 'status'), {'rc': 255, 'stdout': '', 'stderr': 'Failed to initialize NVML',
                                              'error': None}),
     'nvlink.links', 'fail', 'nvidia-smi nvlink -s exited with rc 255: Failed to initialize NVML'),
    ('MIG on (testbed fault mig-enabled)',
     _both(_gpu_set(7, 'mig_mode', 'Enabled'), _gpu_set(7, 'mig_pending', 'Enabled')),
     'gpu.mig', 'fail', 'GPU 7 (00000000:CC:00.0): MIG Enabled current, Enabled pending'),
    ('MIG on after the next reset (testbed fault mig-enabled VALUE=pending)',
     _gpu_set(7, 'mig_pending', 'Enabled'),
     'gpu.mig', 'fail', 'GPU 7 (00000000:CC:00.0): MIG Enabled pending'),
    ('MIG on, and the site wants it: inference nodes',
     _both(_set((1, 'nodeprep_readiness_mig'), 'enabled'),
           (lambda state: [g.update(mig_mode='Enabled', mig_pending='Enabled') for g in state[0]['nvidia']['gpus']])),
     'gpu.mig', 'pass', 'MIG enabled on 8 GPUs'),
    ('VBIOS differs on one GPU',
     _gpu_set(3, 'vbios_version', '97.00.FA.00.0A'),
     'gpu.vbios', 'warn', '2 VBIOS versions: 97.00.FA.00.09 on GPU 0 (00000000:8F:00.0), GPU 1 (00000000:90:00.0), '
                          'GPU 2 (00000000:96:00.0), GPU 4 (00000000:C4:00.0), GPU 5 (00000000:C5:00.0), GPU 6 '
                          '(00000000:CB:00.0), GPU 7 (00000000:CC:00.0); 97.00.FA.00.0A on GPU 3 (00000000:97:00.0)'),
    ('uncorrectable ECC errors since the driver loaded',
     _gpu_set(1, 'ecc', {'current': 'Enabled', 'pending': 'Enabled', 'volatile_uncorrectable': 3,
                         'aggregate_uncorrectable': 3}),
     'gpu.health', 'fail', 'GPU 1 (00000000:90:00.0): 3 uncorrectable ECC errors since the driver loaded'),
    ('old uncorrectable ECC errors only',
     _gpu_set(1, 'ecc', {'current': 'Enabled', 'pending': 'Enabled', 'volatile_uncorrectable': 0,
                         'aggregate_uncorrectable': 2}),
     'gpu.health', 'warn', 'GPU 1 (00000000:90:00.0): 2 uncorrectable ECC errors in its lifetime'),
    ('Xid 79 in the kernel log',
     _xid([XID79, XID79]),
     'gpu.health', 'fail', "Xid 79 on 0000:c4:00.0 x2: pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
    ('an application Xid only',
     _xid([XID13]),
     'gpu.health', 'warn', 'Xid 13 on 0000:8f:00.0 x1: pid=4242, name=python3, Graphics SM Warp Exception on '
                           '(GPC 0, TPC 1, SM 0): Out Of Range Address'),
    ('kernel log unreadable',
     _set((2, 'kernel_log'), {'source': None, 'lines': None, 'error': 'journalctl rc=1: No journal files were found.'}),
     'gpu.health', 'warn', 'kernel log not read: journalctl rc=1: No journal files were found.'),
    ('user back at the distro memlock',
     _set((0, 'limits', 'effective', 'train', 'memlock'), {'soft': 8192, 'hard': 'unlimited'}),
     'memlock.users', 'fail', 'root unlimited/unlimited, train 8192/unlimited; user train: memlock soft 8192, hard '
                              'unlimited, below unlimited (from no source): no line of '
                              '/etc/security/limits.d/90-nodeprep-memlock.conf applies to this user '
                              '(nodeprep_memlock_domains: *, root)'),
    ('a later limits.d file lowers a user\'s limit',
     _both(_set((0, 'limits', 'effective', 'train', 'memlock'), {'soft': 64, 'hard': 64}),
           _set((0, 'limits', 'sources'), {'train': {'memlock': {'soft': '/etc/security/limits.d/99-site.conf:4',
                                                                 'hard': '/etc/security/limits.d/99-site.conf:4'}}})),
     'memlock.users', 'fail', 'root unlimited/unlimited, train 64/64; user train: memlock soft 64, hard 64, below '
                              'unlimited: /etc/security/limits.d/99-site.conf:4 wins over '
                              '/etc/security/limits.d/90-nodeprep-memlock.conf (pam_limits applies a later file or a '
                              'more specific domain last); the role does not edit files it does not own: change or '
                              'remove that line'),
    ('a larger limit than wanted',
     _both(_set((1, 'nodeprep_memlock_value'), 65536),
           (lambda state: state[0]['nodeprep_files'].update(F.memlock_files(want=65536)))),
     'memlock.users', 'pass', 'root unlimited/unlimited, train unlimited/unlimited'),
    ('user unknown on the node',
     _set((1, 'nodeprep_memlock_verify_users'), ['root', 'train', 'nobody2']),
     'memlock.users', 'fail', 'not gathered: subsets: limits; limits_users: nobody2',
     # The plan is not made without the facts it asks for: both memlock checks fail (a real gather of an unknown
     # user fails, naming it).
     {'memlock.services': 'fail'}),
    ('service without the drop-in',
     _set((0, 'limits', 'systemd', 'services', 'slurmd', 'memlock'), {'soft': 8192, 'hard': 8192}),
     'memlock.services', 'fail', 'default unlimited/unlimited, slurmd 8192/8192; slurmd: LimitMEMLOCK soft 8192, hard '
                                 '8192, below unlimited although '
                                 '/etc/systemd/system/slurmd.service.d/90-nodeprep-memlock.conf is in place: a later '
                                 'drop-in of the unit wins, or the unit was not reloaded (systemctl cat '
                                 'slurmd.service; systemctl daemon-reload); the role does not edit files it does not '
                                 'own'),
    ('systemd not running',
     _set((0, 'limits', 'systemd'), {'default': {'memlock': None}, 'services': {'slurmd': None},
                                     'reason': 'this host was not booted with systemd (/run/systemd/system is missing)'}),
     'memlock.services', 'warn',
     'default unset/unset, slurmd not reported; systemd was not asked: this host was not booted with systemd '
     '(/run/systemd/system is missing); slurmd: not reported (this host was not booted with systemd '
     '(/run/systemd/system is missing)); its drop-in is in place'),
    ('service not installed',
     _set((0, 'limits', 'systemd', 'services', 'slurmd'), None),
     'memlock.services', 'warn', 'default unlimited/unlimited, slurmd not reported; slurmd: not reported; its drop-in '
                                 'is in place'),
    ('/dev/shm at the tmpfs default of half the RAM',
     _set((0, 'shm', 'size_bytes'), 503 * F.GIB),
     'shm.size', 'fail', 'live 503.0 GiB, fstab 716.0 GiB; live: /dev/shm is 503.0 GiB, wanted 716.0 GiB'),
    ('/dev/shm too small, live size not managed',
     _both(_set((0, 'shm', 'size_bytes'), 503 * F.GIB), _set((1, 'nodeprep_shm_remount'), False)),
     'shm.size', 'warn',
     'live 503.0 GiB, fstab 716.0 GiB; live: /dev/shm is 503.0 GiB, wanted 716.0 GiB (live size not managed: '
     'nodeprep_shm_remount is false)'),
    ('/dev/shm larger and shrinking wanted',
     _both(_set((0, 'shm', 'size_bytes'), 1007 * F.GIB), _set((1, 'nodeprep_shm_shrink'), True)),
     'shm.size', 'fail', 'live 1007.0 GiB, fstab 716.0 GiB; live: /dev/shm is 1007.0 GiB, wanted 716.0 GiB'),
    ('/dev/shm resized live only',
     _set((0, 'shm', 'fstab'), None),
     'shm.size', 'fail', 'live 716.0 GiB, no fstab line (the next boot gives the tmpfs default, half of RAM: '
                         '1007.0 GiB); no /dev/shm line in fstab'),
    ('/dev/shm and its fstab entry larger than wanted (a GPU fell off the bus): not a shm failure',
     _both(_set((0, 'shm', 'size_bytes'), 800 * F.GIB), _set((0, 'shm', 'fstab', 'size_bytes'), 800 * F.GIB)),
     'shm.size', 'pass', 'live 800.0 GiB, fstab 800.0 GiB'),
    ('fstab entry larger than wanted and shrinking wanted',
     _both(_set((0, 'shm', 'fstab', 'size_bytes'), 800 * F.GIB), _set((1, 'nodeprep_shm_shrink'), True)),
     'shm.size', 'fail', 'live 716.0 GiB, fstab 800.0 GiB; fstab: /dev/shm is 800.0 GiB in fstab, wanted 716.0 GiB'),
    ('/dev/shm full (testbed fault shm-full)',
     _both(_set((0, 'shm', 'free_bytes'), 0), _set((0, 'shm', 'used_bytes'), 716 * F.GIB)),
     'shm.size', 'fail',
     'live 716.0 GiB, fstab 716.0 GiB; full: only 0 B free (stale segments of crashed jobs? see ls -la /dev/shm)'),
    ('/dev/shm nearly full, still above the threshold',
     _set((0, 'shm', 'free_bytes'), 40 * F.GIB),
     'shm.size', 'pass', 'live 716.0 GiB, fstab 716.0 GiB'),
    # nccl.config is the nccl role's plan (tests/unit/plugins/module_utils/plans/test__plan_nccl.py has its table):
    # the file is compared by SHA-1 with what the role writes, never decoded.
    ('nccl.conf edited by hand',
     _set((0, 'nodeprep_files', '/etc/nccl.conf'), F.file_state('NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=ens3f0np0\n')),
     'nccl.config', 'fail', '/etc/nccl.conf: content differs'),
    ('nccl.conf comment holding "=": older NCCL reads it as a setting',
     _set((0, 'nodeprep_files', '/etc/nccl.conf'), F.file_state('# NCCL_DEBUG=INFO\n' + F.NCCL_CONF)),
     'nccl.config', 'fail', '/etc/nccl.conf: content differs'),
    ('nccl.conf with a byte that is not UTF-8',
     _set((0, 'nodeprep_files', '/etc/nccl.conf'), F.file_state(F.NCCL_CONF.encode('utf-8') + b'\xe9\n')),
     'nccl.config', 'fail', '/etc/nccl.conf: content differs'),
    ('nccl.conf mode changed',
     _set((0, 'nodeprep_files', '/etc/nccl.conf'), F.file_state(F.NCCL_CONF, mode='0600')),
     'nccl.config', 'fail', '/etc/nccl.conf: mode 0600, not 0644'),
    ('a name nothing reads in the settings: the role writes it and warns',
     _both(_set((0, 'nodeprep_files', '/etc/nccl.conf'), F.file_state(F.NCCL_CONF + 'NCCL_TIMEOUT=1800\n')),
           _set((1, 'nodeprep_nccl_conf', 'NCCL_TIMEOUT'), 1800)),
     'nccl.config', 'warn', "/etc/nccl.conf: as wanted; names nothing reads: nodeprep_nccl_conf.NCCL_TIMEOUT: NCCL "
                            "never reads it; PyTorch's collective timeout is set in code (init_process_group("
                            "timeout=...))"),
    ('a name nothing reads with nodeprep_nccl_strict: the role refuses it',
     _both(_set((1, 'nodeprep_nccl_conf', 'PYTORCH_ENABLE_FP8'), 1), _set((1, 'nodeprep_nccl_strict'), True)),
     'nccl.config', 'fail', 'the settings of role nccl are invalid: nodeprep_nccl_conf.PYTORCH_ENABLE_FP8: no '
                            'framework reads it (refused: nodeprep_nccl_strict is true)'),
    ('GRO back on after a NIC firmware update',
     _set((0, 'nics', 'ens3f0np0', 'features', 'generic-receive-offload', 'enabled'), True),
     'nic.offload', 'fail', 'ens3f0np0: generic-receive-offload is on'),
    ('fixed feature, ignored',
     _both(_set((0, 'nics', 'ens3f0np0', 'features', 'large-receive-offload'), {'enabled': True, 'fixed': True}),
           _set((1, 'nodeprep_nic_offload_ignore_fixed'), True)),
     'nic.offload', 'warn',
     'ens3f0np0: large-receive-offload is on [fixed]: the driver does not allow a change'),
    ('feature name ethtool does not know',
     _set((1, 'nodeprep_nic_offload_features'), {'rdma-offload': False}),
     'nic.offload', 'fail', "interface ens3f0np0: unknown feature 'rdma-offload'; the features this device has are: "
     'generic-receive-offload, large-receive-offload, tcp-segmentation-offload; ethtool -K also takes the short '
     'names: tso, gro, lro'),
    ('no NIC on the training network',
     _set((1, 'nodeprep_nic_offload_networks'), ['10.99.0.0/16']),
     'nic.offload', 'skip', 'no NIC matches (interfaces -, drivers -, networks 10.99.0.0/16)'),
    ('fabric manager stopped',
     _unit('nvidia-fabricmanager.service', active_state='failed'),
     'fabric.manager', 'fail', '2 NVSwitches on the PCI bus; nvidia-fabricmanager: failed, enabled'),
    ('fabric not trained on one GPU',
     _gpu_set(7, 'fabric', {'state': 'In Progress', 'status': None}),
     'gpu.fabric', 'fail', 'GPU 7 (00000000:CC:00.0): fabric state In Progress (status N/A); CUDA cannot use the GPU '
                           'until the fabric is Completed'),
    # The testbed fault allreduce-slow (factor 0.5): all_reduce_perf's bus bandwidth halved, nothing else changes.
    ('all-reduce at half the bus bandwidth (testbed fault allreduce-slow)',
     _set((0, r.PERF_FACT, 'all_reduce_perf', 'stdout'), F.allreduce_output(8, 410.0)),
     'perf.allreduce', 'fail', 'mean bus bandwidth 410.0 GB/s at 1 GiB to 16 GiB over 8 GPUs, below the 440 GB/s of b200 '
                               '(oci-hpc)'),
    ('a wrong value in the all-reduce (data corruption)',
     _set((0, r.PERF_FACT, 'all_reduce_perf', 'stdout'), F.allreduce_output(8, 820.0, wrong=3)),
     'perf.allreduce', 'fail', '#wrong above 0 at 16 GiB (out-of-place 0, in-place 3)'),
    ('one GPU slow from the host (a PCIe link at half width under load)',
     _set((0, r.PERF_FACT, 'nvbandwidth', 'stdout'), F.nvbandwidth_output(8, [55.0] * 5 + [27.4] + [55.0] * 2, 55.5,
                                                                          750.0)),
     'perf.nvbandwidth', 'fail', 'host_to_device_memcpy_ce: 1 of 8 cells below 48 GB/s: GPU 5 27.4 GB/s; '
                                 'host_to_device_memcpy_ce min 27.4 GB/s (GPU 5); device_to_host_memcpy_ce min 55.5 GB/s '
                                 '(GPU 0); device_to_device_memcpy_read_ce min 750.0 GB/s (GPU 0 -> GPU 1)'),
    ('the node runs a job: the gates skip',
     _set((0, r.PERF_WHERE_FACT), {'run': False, 'why': 'not run: busy, Slurm runs job 4242 on this node (State=MIXED)'}),
     'perf.allreduce', 'skip', 'not run: busy, Slurm runs job 4242 on this node (State=MIXED)',
     {'perf.nvbandwidth': 'skip'}),
    # issue 30: the open kernel modules on Linux 5.14 serve DMA-BUF, so auto does not need nvidia_peermem
    ('nvidia_peermem unloaded on the open modules (testbed fault peermem-unloaded): DMA-BUF under auto',
     _set((0, 'kernel_state', 'rdma', 'peermem_loaded'), False),
     'rdma.peer_memory', 'pass', 'DMA-BUF (kernel ' + RUNNING + ', open kernel modules); nvidia_peermem not loaded'),
    ('nvidia_peermem built before OFED, peermem declared (testbed fault peermem-no-ofed)',
     _both(_set((0, 'kernel_state', 'rdma', 'peermem_loaded'), False),
           _set((0, 'kernel_state', 'rdma', 'peer_symbols'), ['ib_register_peer_memory_client',
                                                              'ib_unregister_peer_memory_client']),
           _set((0, 'kernel_state', 'rdma', 'peermem_module'), {'found': True, 'depends': []}),
           _set((1, 'nodeprep_rdma_path'), 'peermem')),
     'rdma.peer_memory', 'fail',
     'nvidia_peermem not loaded (/sys/module/nvidia_peermem missing) for ConnectX 0000:8d:00.0; nvidia_peermem was '
     'built without the peer-memory API of MLNX_OFED/DOCA-OFED (modinfo -F depends nvidia_peermem: none; no ib_core): '
     'its init returns -EINVAL and modprobe nvidia_peermem fails with "Invalid argument"; rebuild the driver after '
     'installing OFED (dkms install, or reinstall the driver packages)'),
    ('NVLinks down on one GPU pair (testbed fault nvlink-down)',
     _nvlink_pair('GPU1', 'GPU6', 'NV12'),
     'gpu.topology', 'fail', 'NVLink degraded on 1 of 28 GPU pairs: GPU1 (00000000:90:00.0)-GPU6 (00000000:CB:00.0): '
                             'NV12, want NV18; 27 GPU pairs at NV18 (B200 with NVSwitches: NV18); 8 of 8 GPUs with a '
                             'NIC at PIX/PXB'),
]


@pytest.mark.parametrize('fault', FAULTS, ids=[f[0] for f in FAULTS])
def test_single_fault(fault):
    name, mutate, check_id, status, observed = fault[:5]
    # The fixture is an HGX node outside any IMEX domain: imex.domain skips whatever the fault.
    also = dict(NOT_IN_IMEX_DOMAIN, **(fault[5] if len(fault) > 5 else {}))
    state = [copy.deepcopy(x) for x in F.converged()]
    mutate(state)
    checks = F.evaluate(*state)
    found = by_id(checks, check_id)
    assert (found['status'], found['observed']) == (status, observed), name
    others = dict((c['id'], c['status']) for c in checks if c['id'] != check_id and c['status'] != 'pass')
    assert others == also


# ---------------------------------------------------------------------------------------------------------------------
# settings that change what "ready" means


def test_unmanaged_settings_skip():
    facts, settings, probe = F.converged()
    settings = F.role_settings()
    settings.update({'nodeprep_memlock_limits': False, 'nodeprep_memlock_systemd_default': False,
                     'nodeprep_nvidia_driver_persistenced': False, 'nodeprep_nvidia_driver_blacklist_nouveau': False,
                     'nodeprep_nvidia_driver_fabricmanager': 'never'})
    got = dict((c['id'], (c['status'], c['observed'])) for c in F.evaluate(facts, settings, probe))
    assert got['gpu.power_limit'] == ('skip', 'not managed (nodeprep_gpu_settings_power_limit unset or '
                                              'nodeprep_gpu_settings_apply false)')
    assert got['gpu.clocks'] == ('skip', 'not managed (no clock settings or nodeprep_gpu_settings_apply false)')
    assert got['memlock.users'] == ('skip', 'not managed (nodeprep_memlock_limits false)')
    assert got['memlock.services'] == ('skip', 'not managed (nodeprep_memlock_systemd_default false, no service)')
    assert got['driver.persistenced'] == ('skip', 'not checked')
    assert got['driver.nouveau_blacklisted'] == ('skip', 'not checked')
    # never: the role removes the fabric manager it finds installed (the nvidia_driver plan's extras), so readiness
    # warns until it is gone, and skips the check on a node without it.
    assert got['fabric.manager'] == ('warn', '2 NVSwitches on the PCI bus; libnvidia-nscq, nvidia-fabricmanager '
                                             'installed, not wanted (nodeprep_nvidia_driver_fabricmanager=never): the '
                                             'role removes them')
    assert got['nic.offload'] == ('skip', 'no NIC offload setting managed')
    facts['kernel_state']['driver_node'] = {'repos': {}, 'packages': {}, 'versionlock': [], 'versionlock_plugin': True,
                                            'module_stream': '580-open'}
    got = dict((c['id'], (c['status'], c['observed'])) for c in F.evaluate(facts, settings, probe))
    assert got['fabric.manager'] == ('skip', '2 NVSwitches on the PCI bus; not managed '
                                             '(nodeprep_nvidia_driver_fabricmanager never)')
    assert got['gpu.count'] == ('pass', 'nvidia-smi: 8, PCI bus: 8')
    # shm from the role defaults: half of 8 x 183359 MiB rounded up to a GiB
    assert got['shm.size'] == ('fail', 'live 716.0 GiB, fstab 716.0 GiB; live: /dev/shm is 716.0 GiB, wanted 717.0 GiB; '
                                       'fstab: /dev/shm is 716.0 GiB in fstab, wanted 717.0 GiB')


MEMLOCK_NOT_GATHERED = ('subsets: limits; files: /etc/security/limits.d/90-nodeprep-memlock.conf, '
                        '/etc/systemd/system.conf.d, /etc/systemd/system.conf.d/90-nodeprep-memlock.conf, '
                        '/etc/systemd/system/slurmd.service.d, '
                        '/etc/systemd/system/slurmd.service.d/90-nodeprep-memlock.conf; limits_users: root, train; '
                        'limits_services: slurmd')


NO_SCHEDULER = ('not run: no scheduler was asked and nodeprep_readiness_node_idle is false (the gates run only on a '
                'node that runs no job: idle or drained in Slurm, or declared idle)')


def test_skip_checks_and_missing_namespaces():
    facts, settings, probe = F.converged()
    settings['nodeprep_readiness_skip_checks'] = ['gpu.health']
    checks = F.evaluate({'shm': facts['shm'], 'nodeprep_gathered': ['shm']}, settings, None)
    assert statuses(checks) == [
        # The kernel role's plan as well.
        ('kernel.devel_matched', 'fail', 'not gathered: subsets: kernel'),
        # The nvidia_driver role's plan needs the kernel and NVIDIA facts: its checks fail (never skip, never pass);
        # driver.loaded adds what readiness observes itself.
        ('driver.nouveau_blacklisted', 'fail', 'not gathered: subsets: kernel, nvidia'),
        ('driver.loaded', 'fail', 'not gathered: subsets: kernel, nvidia; nvidia-smi failed: not found'),
        ('driver.open_modules', 'fail', 'not gathered: subsets: kernel, nvidia'),
        ('driver.persistenced', 'fail', 'not gathered: subsets: kernel, nvidia'),
        ('gpu.count', 'skip', 'neither kernel nor nvidia facts were gathered'),
        ('gpu.power_limit', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.clocks', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.health', 'skip', 'not checked'),
        ('gpu.throttle', 'skip', 'nvidia-smi lists no GPU'),
        ('pci.link', 'skip', 'nvidia-smi lists no GPU'),
        ('nvlink.links', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.remapped_rows', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.mig', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.vbios', 'skip', 'nvidia-smi lists no GPU'),
        # The memlock role's plan cannot be made without its facts: its checks fail (the readiness role gathers them).
        ('memlock.users', 'fail', 'not gathered: ' + MEMLOCK_NOT_GATHERED),
        ('memlock.services', 'fail', 'not gathered: ' + MEMLOCK_NOT_GATHERED),
        ('shm.size', 'pass', 'live 716.0 GiB, fstab 716.0 GiB'),
        # The nccl role's plan needs the file's state: not gathered fails (never skip, never pass).
        ('nccl.config', 'fail', 'not gathered: subsets: kernel; files: /etc/nccl.conf'),
        # Its verdict is the nic_offload plan, which says what it could not see: never a pass or a skip.
        ('nic.offload', 'fail', 'not gathered: subsets: nic; files: /etc/systemd/system/nodeprep-nic-offload@.service, '
                                '/etc/nodeprep/nic-offload, /etc/nodeprep/nic-offload/*.env, '
                                '/etc/systemd/system/sys-subsystem-net-devices-*.device.wants, '
                                '/etc/systemd/system/sys-subsystem-net-devices-*.device.wants/nodeprep-nic-offload@*'
                                '.service'),
        ('fabric.manager', 'fail', 'not gathered: subsets: kernel, nvidia'),
        ('gpu.fabric', 'skip', 'nvidia-smi lists no GPU'),
        ('gpu.topology', 'skip', 'nvidia-smi lists no GPU'),
        # Opt-in, and no probe was read.
        ('gpu.dcgm_diag', 'skip', 'not run: nodeprep_readiness_dcgm is false (it takes about a minute)'),
        # The RDMA checks read the kernel facts, which were not asked for.
        ('rdma.peer_memory', 'skip', 'the RDMA facts were not gathered'),
        ('pci.acs', 'skip', 'the RDMA facts were not gathered'),
        ('kernel.iommu', 'skip', 'the RDMA facts were not gathered'),
        # Not configured: the imex plan asks for nothing.
        ('imex.domain', 'skip', 'nodeprep_imex_domain_group is not set'),
        # The perf_tools plan (nodeprep_perf_tools_install: true) needs its facts; the gates had no decision of where
        # they may run: as on a node no scheduler was asked about.
        ('perf.tools', 'fail', 'not gathered: subsets: kernel, nvidia; files: /opt/nodeprep/perf, '
                               '/opt/nodeprep/perf/src, /opt/nodeprep/perf/build, /opt/nodeprep/perf/bin, '
                               '/opt/nodeprep/perf/bin/all_reduce_perf, /opt/nodeprep/perf/src/nccl-tests-2.17.9.tar.gz, '
                               '/opt/nodeprep/perf/src/nccl-tests-2.17.9/Makefile, '
                               '/opt/nodeprep/perf/build/*/all_reduce_perf, /opt/nodeprep/perf/bin/nvbandwidth, '
                               '/opt/nodeprep/perf/src/nvbandwidth-0.8.tar.gz, '
                               '/opt/nodeprep/perf/src/nvbandwidth-0.8/CMakeLists.txt, '
                               '/opt/nodeprep/perf/build/*/nvbandwidth'),
        ('perf.allreduce', 'skip', NO_SCHEDULER),
        ('perf.nvbandwidth', 'skip', NO_SCHEDULER),
    ]


def test_nccl_socket_ifname_from_the_training_network():
    facts, settings, probe = F.converged()
    settings['nodeprep_nccl_socket_networks'] = ['10.20.0.0/16']
    del settings['nodeprep_nccl_conf']['NCCL_SOCKET_IFNAME']
    check = by_id(F.evaluate(facts, settings, probe), 'nccl.config')
    # The file holds NCCL_SOCKET_IFNAME=ens3f0np0 (a prefix match); the role writes the exact-match list.
    assert (check['status'], check['observed']) == ('fail', '/etc/nccl.conf: content differs')
    assert check['expected'] == ('/etc/nccl.conf with NCCL_DEBUG=WARN, NCCL_IB_TIMEOUT=22, '
                                 'NCCL_SOCKET_IFNAME==ens3f0np0; only names NCCL reads')
    facts['nodeprep_files']['/etc/nccl.conf'] = F.file_state(
        'NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\nNCCL_SOCKET_IFNAME==ens3f0np0\n')
    check = by_id(F.evaluate(facts, settings, probe), 'nccl.config')
    assert (check['status'], check['observed']) == ('pass', '/etc/nccl.conf: as wanted')


def test_nccl_config_fails_when_the_nic_facts_could_not_be_read():
    facts, settings, probe = F.converged()
    settings['nodeprep_nccl_socket_networks'] = ['10.20.0.0/16']
    del settings['nodeprep_nccl_conf']['NCCL_SOCKET_IFNAME']
    facts['nodeprep_errors'] = {'nic': 'nic facts: ip -j addr show failed'}
    check = by_id(F.evaluate(facts, settings, probe), 'nccl.config')
    assert (check['status'], check['observed']) == (
        'fail', 'the NIC facts of gpu-a01 could not be read, so NCCL_SOCKET_IFNAME for '
                'nodeprep_nccl_socket_networks=["10.20.0.0/16"] is not known: nic facts: ip -j addr show failed')
    # gpu_node_facts (fail_on_error=false) leaves the namespace out when its reader failed: not gathered, fail.
    del facts['nics']
    check = by_id(F.evaluate(facts, settings, probe), 'nccl.config')
    assert (check['status'], check['observed']) == ('fail', 'not gathered: subsets: nic')


def test_plans_are_required():
    facts, settings, probe = F.converged()
    with pytest.raises(r.ReadinessError) as exc:
        r.evaluate(facts, settings, probe, {})
    roles = sorted(set(r.PLAN_CHECKS.values()))
    assert str(exc.value) == ("plans: no plan for role {0}; the checks {1} read the roles' plans (the readiness role "
                              "makes them with gpufleet.nodeprep.node_plan)".format(
                                  ', '.join(roles), ', '.join(sorted(r.PLAN_CHECKS))))
    # rdma and dcgm own their checks through their plans (rdma.peer_memory, pci.acs; gpu.dcgm_diag); imex its domain,
    # perf_tools perf.tools.
    assert roles == ['dcgm', 'gpu_settings', 'imex', 'kernel', 'memlock', 'nccl', 'nic_offload', 'nvidia_driver',
                     'perf_tools', 'rdma', 'shm']


def test_applications_clocks_deprecated_driver_warns():
    facts, settings, probe = F.converged()
    settings['nodeprep_gpu_settings_locked_gpu_clocks'] = None
    settings['nodeprep_gpu_settings_applications_clocks'] = {'memory': 3996, 'graphics': 1965}
    settings['nodeprep_gpu_settings_gpus'] = [0, 'GPU-00000000-0000-0000-0000-000000000001', '0000:96:00.0']
    for gpu in facts['nvidia']['gpus']:
        gpu['applications_clocks'] = None
    check = by_id(F.evaluate(facts, settings, probe), 'gpu.clocks')
    assert check['status'] == 'warn'
    assert check['observed'] == (
        'within the supported range on all 3 GPUs; applications_clocks are left alone on node1: the driver reports '
        'them as deprecated or not supported on ' + ', '.join('GPU {0} ({1})'.format(i, F.BUS_IDS[i]) for i in range(3))
        + '; use locked_gpu_clocks and locked_memory_clocks instead')


@pytest.mark.parametrize('settings, message', [
    ({'nodeprep_readiness_skip_checks': ['gpu.power', 'nic.offload']},
     'nodeprep_readiness_skip_checks: unknown check ids gpu.power; known: ' + ', '.join(r.CHECK_IDS)),
    ({'nodeprep_expected_gpus': 'eight'}, "nodeprep_expected_gpus: 'eight' is not a whole number"),
    ({'nodeprep_readiness_xid_fail': [79, 'GSP']}, "nodeprep_readiness_xid_fail: 'GSP' is not an Xid code (a whole "
                                                   "number)"),
])
def test_bad_settings_are_refused(settings, message):
    facts, base, probe = F.converged()
    base.update(settings)
    with pytest.raises(r.ReadinessError) as exc:
        F.evaluate(facts, base, probe)
    assert str(exc.value) == message


def test_a_bad_nic_offload_setting_fails_its_check_only():
    """The nic_offload role's settings are typed and checked by its plan: nic.offload fails with the plan's words."""
    facts, settings, probe = F.converged()
    settings['nodeprep_nic_offload_networks'] = ['10.20.0.0/33']
    checks = F.evaluate(facts, settings, probe)
    assert by_id(checks, 'nic.offload')['observed'] == (
        'the settings of role nic_offload are invalid: nodeprep_nic_offload_networks=["10.20.0.0/33"]: '
        "nodeprep_nic_offload_networks[0] '10.20.0.0/33' is not a valid network (CIDR such as 10.20.0.0/16): "
        "'10.20.0.0/33' does not appear to be an IPv4 or IPv6 network")
    assert [(c['id'], c['status']) for c in checks if c['status'] != 'pass'] == [('nic.offload', 'fail'),
                                                                                 ('imex.domain', 'skip')]


@pytest.mark.parametrize('facts, settings, message', [
    ([], {}, 'facts: expected a dict of fact namespaces, got list'),
    ({}, 'x', 'settings: expected a dict of role variables, got str'),
])
def test_bad_arguments(facts, settings, message):
    with pytest.raises(r.ReadinessError) as exc:
        F.evaluate(facts, settings)
    assert str(exc.value) == message


# ---------------------------------------------------------------------------------------------------------------------
# helpers


@pytest.mark.parametrize('text, result', [
    ('00000000:8F:00.0', '0000:8f:00.0'), ('0000:8f:00.0', '0000:8f:00.0'), ('8F:00.0', '0000:8f:00.0'),
    ('0000:c4:00', '0000:c4:00.0'), ('00000001:3B:00.1', '0001:3b:00.1'),
])
def test_normalize_bus_id(text, result):
    assert r.normalize_bus_id(text) == result


def test_normalize_bus_id_error():
    with pytest.raises(r.ReadinessError) as exc:
        r.normalize_bus_id('GPU-1234')
    assert str(exc.value) == "PCI bus id 'GPU-1234' is not DOMAIN:BUS:DEVICE.FUNCTION"


def test_parse_xid_lines():
    assert r.parse_xid_lines(['kernel: eth0: link up', XID79, XID13]) == [
        {'bus_id': '0000:c4:00.0', 'xid': 79, 'text': "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
         'line': XID79},
        {'bus_id': '0000:8f:00.0', 'xid': 13, 'text': 'pid=4242, name=python3, Graphics SM Warp Exception on '
                                                      '(GPC 0, TPC 1, SM 0): Out Of Range Address', 'line': XID13},
    ]


@pytest.mark.parametrize('mutate, lost', [
    (lambda s: None, []),
    (_drop_gpu(0), [{'bus_id': '0000:8f:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'}]),
    (_both(_drop_gpu(7), _drop_gpu(3)),
     [{'bus_id': '0000:97:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'},
      {'bus_id': '0000:cc:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'}]),
    (_set((0, 'nvidia'), {'present': True, 'error': 'nvidia-smi timed out after 30 s', 'gpus': []}),
     [{'bus_id': b, 'reason': 'nvidia-smi failed: nvidia-smi timed out after 30 s'} for b in F.SYSFS_IDS]),
])
def test_find_lost_gpus(mutate, lost):
    state = [copy.deepcopy(x) for x in F.converged()]
    mutate(state)
    assert r.find_lost_gpus(state[0]) == lost


def test_builder_matches_the_real_b200_capture():
    """The hand-built GPUs carry the values of the real 8x B200 capture (only power limit/persistence converged)."""
    path = os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')
    with open(path) as handle:
        real = parse_nvsmi_xml(handle.read())
    assert real['driver_version'] == '580.105.08'
    keys = ('index', 'pci_bus_id', 'name', 'architecture', 'memory_total_mib', 'default_power_limit_w',
            'min_power_limit_w', 'max_power_limit_w', 'max_clocks', 'applications_clocks', 'ecc', 'remapped_rows',
            'pci_device_id')
    for got, built in zip(real['gpus'], F.converged()[0]['nvidia']['gpus']):
        assert dict((k, got[k]) for k in keys) == dict((k, built[k]) for k in keys)
        assert (got['fabric']['state'], got['fabric']['status']) == ('Completed', 'Success')
    # as captured: persistence off and the default 1000 W limit - what a fresh node shows
    facts, settings, probe = F.converged()
    facts['nvidia'] = dict(real, present=True, error=None)
    checks = dict((c['id'], (c['status'], c['observed'])) for c in F.evaluate(facts, settings, probe))
    assert checks['gpu.power_limit'] == ('fail', 'all 8 GPUs at 1000 W; GPUs 0, 1, 2, 3, 4, 5, 6, 7: power limit '
                                                 '1000 W, wanted 700 W')
    assert checks['gpu.count'] == ('pass', 'nvidia-smi: 8, PCI bus: 8')
    assert checks['gpu.health'][0] == 'pass'
    assert checks['shm.size'] == ('pass', 'live 716.0 GiB, fstab 716.0 GiB')


# ---------------------------------------------------------------------------------------------------------------------
# the report: JSON, JUnit and HTML say the same thing


def test_role_passes_exactly_the_settings_the_checks_use():
    # The readiness_info action passes SETTING_NAMES (typed once; test_readiness_info.py of the action checks it); the
    # roles' own variables reach the checks through their plans.
    assert set(r.SETTING_NAMES) <= set(F.role_settings())
    assert not [name for name in r.SETTING_NAMES if name.startswith(('nodeprep_rdma_', 'nodeprep_dcgm_'))]


def test_plan_checks_are_the_plans_checks():
    """PLAN_CHECKS is the union of the plans' CHECKS: each check a role owns is that role's plan's drift."""
    from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
    owned = dict((check, role) for role, module in _plans.RULES.items() for check in getattr(module, 'CHECKS', ()))
    assert owned == r.PLAN_CHECKS


def test_missing_setting_is_refused_by_name():
    facts, settings, probe = F.converged()
    del settings['nodeprep_readiness_xid_fail']
    del settings['nodeprep_expected_gpus']
    with pytest.raises(r.ReadinessError) as exc:
        F.evaluate(facts, settings, probe)
    assert str(exc.value) == ('settings: missing nodeprep_expected_gpus, nodeprep_readiness_xid_fail; give every '
                              'variable the checks read (the readiness role passes them all; docs/readiness.md '
                              'lists them)')


def test_hung_nvidia_smi_fails_driver_and_count_only():
    """With fail_on_error=false a hung nvidia-smi leaves nvidia.present false; the GPU checks that need it follow."""
    facts, settings, probe = F.converged()
    facts['nvidia'] = {'present': False, 'timed_out': True, 'driver_version': None, 'attached_gpus': 0, 'gpus': [],
                       'error': 'nvidia-smi -q -x did not answer within the timeout of 15 seconds and was killed'}
    _perf_not_run('not run: nvidia-smi listed no GPU')((facts, settings, probe))
    checks = dict((c['id'], c) for c in F.evaluate(facts, settings, probe))
    assert checks['driver.loaded']['status'] == 'fail'
    assert checks['driver.loaded']['observed'] == (
        'nvidia-smi failed: nvidia-smi -q -x did not answer within the timeout of 15 seconds and was killed')
    assert checks['gpu.count']['status'] == 'fail'
    failing = sorted(k for k, c in checks.items() if c['status'] == 'fail')
    # The GPU settings and health could not be read either: they fail, they do not skip.
    # The performance gates ran nothing (no GPU listed); the perf_tools plan cannot tell the CUDA toolkit.
    assert failing == ['driver.loaded', 'gpu.clocks', 'gpu.count', 'gpu.fabric', 'gpu.health', 'gpu.mig',
                       'gpu.power_limit', 'gpu.remapped_rows', 'gpu.throttle', 'gpu.topology', 'gpu.vbios',
                       'nvlink.links', 'pci.link', 'perf.allreduce', 'perf.nvbandwidth', 'perf.tools']
    assert checks['perf.allreduce']['observed'] == 'all_reduce_perf not run: nvidia-smi listed no GPU'
    assert checks['gpu.health']['observed'] == ('could not be read: nvidia-smi failed: nvidia-smi -q -x did not '
                                                'answer within the timeout of 15 seconds and was killed')


# ---------------------------------------------------------------------------------------------------------------------
# fabric.manager on HGX B200: the NVSwitches are not on the PCI bus, kernel_facts finds their NVLink 5 bridges


def _nvlink5(facts, fabric='nvlink5', bridges=2):
    pci = facts['kernel_state']['pci']
    pci.update(nvswitches=[], nvswitch_count=0, nvswitch_fabric=fabric, nvlink5_bridge_count=bridges,
               nvlink5_bridges=[{'bus_id': '0000:1{0}:00.0'.format(i)} for i in range(bridges)])
    # The role loads ib_umad for NVLSM at every boot on NVLink 5 (its modules-load.d file is there).
    facts.setdefault('nodeprep_files', {})[_driver.IB_UMAD_CONF] = F.file_state(_driver.IB_UMAD_CONF_TEXT)


@pytest.mark.parametrize('fabric, fm_state, status, observed', [
    ('nvlink5', 'active', 'pass', 'NVLink 5 switch fabric (2 NVLink 5 bridges; its NVSwitches are not on the PCI '
                                  'bus); nvidia-fabricmanager: active, enabled'),
    ('nvlink5', 'failed', 'fail', 'NVLink 5 switch fabric (2 NVLink 5 bridges; its NVSwitches are not on the PCI '
                                  'bus); nvidia-fabricmanager: failed, enabled'),
    ('pci', 'active', 'pass', '0 NVSwitches on the PCI bus; nvidia-fabricmanager: active, enabled'),
    ('none', 'active', 'skip', 'no NVSwitch on the PCI bus and no NVLink 5 switch bridge'),
])
def test_fabric_manager_by_switch_fabric(fabric, fm_state, status, observed):
    facts, settings, probe = F.converged()
    _nvlink5(facts, fabric)
    probe['services']['nvidia-fabricmanager.service']['active_state'] = fm_state
    check = by_id(F.evaluate(facts, settings, probe), 'fabric.manager')
    assert (check['status'], check['observed']) == (status, observed)


def test_fabric_manager_without_the_fabric_key_falls_back_to_the_switch_count():
    facts, settings, probe = F.converged()
    assert 'nvswitch_fabric' not in facts['kernel_state']['pci']
    assert r.fabric_kind(facts) == 'pci'
    facts['kernel_state']['pci']['nvswitch_count'] = 0
    assert r.fabric_kind(facts) == 'none'
    del facts['kernel_state']['pci']
    assert r.fabric_kind(facts) is None


def test_no_nvlsm_unit_is_asked_for():
    facts, settings, probe = F.converged()
    _nvlink5(facts)
    del probe['services']['nvlsm.service']
    check = by_id(F.evaluate(facts, settings, probe), 'fabric.manager')
    assert check['status'] == 'pass'
    assert 'nvlsm' not in check['expected'] + check['observed']


def test_kernel_facts_error_fails_fabric_and_kernel_checks():
    facts, settings, probe = F.converged()
    del facts['kernel_state']
    facts['nodeprep_errors'] = {'kernel': 'kernel facts: cannot read /proc/modules'}
    got = dict((c['id'], (c['status'], c['observed'])) for c in F.evaluate(facts, settings, probe))
    for check_id in ('kernel.devel_matched', 'driver.nouveau_blacklisted', 'fabric.manager'):
        assert got[check_id] == ('fail', 'could not be read: kernel facts: cannot read /proc/modules')
    assert got['memlock.users'][0] == 'pass'


def test_unmanaged_check_stays_skipped_when_its_facts_failed():
    facts, settings, probe = F.converged()
    settings['nodeprep_memlock_limits'] = False
    settings['nodeprep_memlock_systemd_default'] = False
    settings['nodeprep_memlock_services'] = []
    # (the Slurm jobs' check reads the limits subset too: whether slurmd runs)
    settings['nodeprep_memlock_slurm_jobs'] = False
    del facts['limits']
    facts['nodeprep_errors'] = {'limits': 'limits facts: broken'}
    got = dict((c['id'], c['status']) for c in F.evaluate(facts, settings, probe))
    assert (got['memlock.users'], got['memlock.services']) == ('skip', 'skip')


def test_checked_values_of_the_converged_node():
    facts, settings, probe = F.converged()
    assert F.checked_values(facts, settings, probe) == [
        ['GPUs', '8 x NVIDIA B200; driver 580.105.08, CUDA 13.0'],
        ['power limit', '700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs'],
        ['max GPU / memory clock', '1965 / 3996 MHz'],
        ['PCI bus', '8 GPUs; 2 NVSwitches on the PCI bus'],
        ['kernel', RUNNING + '; nvidia module 580.105.08 (open)'],
        ['/dev/shm', '716.0 GiB live, 716.0 GiB in fstab; GPU memory 1.4 TiB, so /dev/shm = 50% of it; wanted at '
                     'least 716.0 GiB'],
        ['memlock (soft/hard KiB)', 'root unlimited/unlimited, train unlimited/unlimited'],
        ['systemd memlock', 'DefaultLimitMEMLOCK unlimited/unlimited, slurmd unlimited/unlimited'],
        ['NICs checked', 'ens3f0np0 (400000 Mb/s, MTU 9000): generic-receive-offload off, large-receive-offload off, '
                         'tcp-segmentation-offload on'],
        ['NCCL files', '/etc/nccl.conf: as wanted'],
    ]


def test_checked_values_say_what_could_not_be_read():
    facts, settings, probe = F.fresh()
    del facts['shm']
    facts['nodeprep_errors'] = {'shm': 'shm facts: /etc/fstab line 3: bad'}
    values = dict(F.checked_values(facts, settings, probe))
    assert values['GPUs'] == 'could not be read: nvidia-smi failed: nvidia-smi not found'
    assert values['/dev/shm'] == 'could not be read: shm facts: /etc/fstab line 3: bad'


# ---------------------------------------------------------------------------------------------------------------------
# gpu.dcgm_diag (the parsers and the rule: test__dcgm.py)


def test_a_dcgm_failure_fails_only_gpu_dcgm_diag_and_names_the_gpu_and_test():
    facts, settings, probe = F.converged()
    doc = probe['dcgm']['diag']['stdout'].replace(
        '"entity_id" : 3,\n' + ' ' * 64 + '"status" : "Pass"',
        '"entity_id" : 3,\n' + ' ' * 64 + '"status" : "Fail", "warnings": [{"warning": "GPU 3 failed", '
        '"error_id": 61, "error_category": 1, "error_severity": 2}]')
    assert doc != probe['dcgm']['diag']['stdout']
    probe['dcgm']['diag'].update(rc=205, stdout=doc)
    checks = F.evaluate(facts, settings, probe)
    assert [(c['id'], c['status']) for c in checks if c['status'] != 'pass'] == [('gpu.dcgm_diag', 'fail'),
                                                                                 ('imex.domain', 'skip')]
    observed = by_id(checks, 'gpu.dcgm_diag')['observed']
    assert observed.startswith('GPU 3 ({0}): diagnostic failed: GPU 3 failed [error 61, severity ISOLATE]'.format(
        [g['pci_bus_id'] for g in facts['nvidia']['gpus'] if g['index'] == 3][0]))


def test_dcgm_diag_skips_on_a_node_that_is_not_a_gpu_node():
    facts, settings, probe = F.converged()
    facts['kernel_state']['pci']['gpu_count'] = 0
    facts['kernel_state']['pci']['gpus'] = []
    facts['nvidia'] = {'present': False, 'error': 'nvidia-smi not found', 'gpus': []}
    checks = F.evaluate(facts, settings, probe)
    assert by_id(checks, 'gpu.dcgm_diag')['status'] == 'skip'
