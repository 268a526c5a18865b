#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_node_facts
short_description: Gather everything that decides whether a GPU node is right, in one round trip
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Runs the readers of M(gpufleet.nodeprep.nvidia_gpu_facts), M(gpufleet.nodeprep.kernel_facts),
    M(gpufleet.nodeprep.limits_facts), M(gpufleet.nodeprep.shm_facts) and M(gpufleet.nodeprep.nic_facts) in a single
    module call, so a play pays one round trip per host for all of them.
  - Sets the same C(ansible_facts) namespaces as those modules (C(nvidia), C(kernel_state), C(limits), C(shm), C(nics))
    and C(nodeprep_gathered), the list of subsets it gathered, which roles use to skip a second gather.
  - With O(units), O(files) or O(packages), it also reads the state of those systemd units, paths and packages in
    the same call (C(nodeprep_units), C(nodeprep_files), C(nodeprep_packages)), so the roles can decide on the
    controller that a template, a boot unit or a package has nothing to do, without a module call of their own.
  - The roles of this collection call it once per play.
  - Runs as an action plugin and a module; the C(limits) subset is resolved by the action on the controller.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
options:
  gather_subset:
    description:
      - Which readers to run. V(all) runs every one but V(imex); an empty list runs none of them (then only what
        O(units), O(files) and O(packages) ask for is read).
      - V(imex) reads NVIDIA IMEX (C(ansible_facts.imex)) only when it is named, never with V(all) - its
        C(nvidia-imex-ctl -N) asks every node of the IMEX domain, which costs time when a peer does not answer.
    type: list
    elements: str
    choices: [all, nvidia, kernel, limits, shm, nic, imex]
    default: [all]
  nvidia_timeout:
    description:
      - Seconds to wait for C(nvidia-smi -q -x) before killing it (it can hang when a GPU fell off the bus).
      - Unset, O(command_timeout) is the limit.
    type: int
  command_timeout:
    description:
      - Seconds each command of the gather may take before it is killed (coreutils C(timeout), then C(KILL) 5 seconds
        later) - C(systemctl), C(rpm), C(dpkg-query), C(ip), C(ethtool), C(modinfo), C(lspci) and the others, and
        C(nvidia-smi) when O(nvidia_timeout) is unset. A command killed there is reported as that reader's error
        (C(nodeprep_errors), or the task's failure with O(fail_on_error)) and in C(nodeprep_timed_out).
      - The playbooks of this collection set it from C(nodeprep_command_timeout).
    type: int
    default: 60
  nvidia_supported_clocks:
    description: Include each GPU's supported clocks table (large).
    type: bool
    default: true
  nvidia_smi:
    description: Path of C(nvidia-smi). By default it is looked up in C(PATH), C(/usr/bin) and C(/usr/local/bin).
    type: path
  nvidia_topology:
    description:
      - Also run C(nvidia-smi topo -m) (with O(nvidia_timeout)) when C(nvidia) is gathered and nvidia-smi lists two
        GPUs or more, and put the parsed matrix in C(nvidia.topology) (C(matrix), C(error)); its time is
        C(nodeprep_timings.nvidia_topology). The readiness role asks for it (check C(gpu.topology)); the other roles
        do not need it.
    type: bool
    default: false
  nvidia_nvlink:
    description:
      - Also run C(nvidia-smi nvlink -s) and C(nvidia-smi nvlink -e) (each with O(nvidia_timeout)) when C(nvidia) is
        gathered and nvidia-smi lists a GPU, and put what they printed in C(nvidia.nvlink) (C(status) and C(errors),
        each with C(rc), C(stdout), C(stderr) and C(error)), unparsed; its time is C(nodeprep_timings.nvidia_nvlink).
        The readiness role asks for it (check C(nvlink.links)), which parses and judges it on the controller.
    type: bool
    default: false
  limits_users:
    description:
      - Users whose effective pam_limits values are reported under C(limits.effective).
      - V(*) is any non-root user that no user, C(@group) or uid-range line names (see M(gpufleet.nodeprep.limits_facts)).
    type: list
    elements: str
    default: []
  limits_services:
    description: systemd services whose effective C(LimitMEMLOCK) is reported under C(limits.systemd.services).
    type: list
    elements: str
    default: []
  nic_interfaces:
    description: Interfaces to report. With neither this nor O(nic_networks), every interface is reported.
    type: list
    elements: str
    default: []
  nic_networks:
    description: Also report the interfaces holding an address inside one of these networks (CIDR, IPv4 or IPv6).
    type: list
    elements: str
    default: []
  nic_nm_properties:
    description:
      - NetworkManager properties (such as C(ethtool.feature-gro)) to read, for each interface reported that
        NetworkManager manages, from its connection (C(nics.<name>.nm_connection) - C(name), C(properties), C(error))
        in the same call; the nic_offload role compares them with what it persists there.
    type: list
    elements: str
    default: []
  shm_path:
    description: The shared memory mount point to report.
    type: path
    default: /dev/shm
  imex_config:
    description:
      - The IMEX daemon's config file that the C(imex) subset reads (and hands to C(nvidia-imex-ctl -c)); its
        C(IMEX_NODE_CONFIG_FILE) names the node list that is read.
    type: path
    default: /etc/nvidia-imex/config.cfg
  imex_timeout:
    description: Seconds C(nvidia-imex-ctl -N -j) may take before it is killed and reported (C(imex.ctl.timed_out)).
    type: int
    default: 30
  units:
    description:
      - systemd units whose state is reported under C(nodeprep_units), read with one C(systemctl show) for all of
        them. A name without a unit type suffix gets C(.service), as systemctl assumes.
      - Empty (the default) reads no unit. When given, C(units) is added to C(nodeprep_gathered).
    type: list
    elements: str
    default: []
  files:
    description:
      - Absolute paths whose state (C(lstat), and the SHA-1 of regular files up to 1 MiB) is reported under
        C(nodeprep_files). Links are reported, not followed.
      - Compare C(nodeprep_files[path].sha1) with C(content | hash('sha1')) or
        C(lookup('ansible.builtin.template', src) | hash('sha1')) to know whether a copy or template task would
        change the file.
      - Empty (the default) reads no file. When given, C(files) is added to C(nodeprep_gathered).
    type: list
    elements: str
    default: []
  packages:
    description:
      - Package names whose installed version is reported under C(nodeprep_packages), read with one C(rpm -q) (EL)
        or one C(dpkg-query -W) (Debian, Ubuntu) call for all of them.
      - Empty (the default) reads no package. When given, C(packages) is added to C(nodeprep_gathered).
    type: list
    elements: str
    default: []
  contents:
    description:
      - Absolute paths of small files (up to 64 KiB) whose text is reported under C(nodeprep_contents), for state
        files that a role must read to decide (the gpu_settings role reads the clock lock record and the boot id).
      - Empty (the default) reads nothing. When given, C(contents) is added to C(nodeprep_gathered).
    type: list
    elements: str
    default: []
  kernel_log_lines:
    description:
      - Also read the NVIDIA Xid lines among the last O(kernel_log_lines) kernel log lines of the current boot
        (C(journalctl -k -b 0), or C(dmesg) where journald has no log) into C(nodeprep_kernel_log), for the readiness
        check C(gpu.health). V(0) (the default) does not read the kernel log.
    type: int
    default: 0
  dcgm_diag:
    description:
      - Also run NVIDIA DCGM's C(dcgmi discovery -l) and, when its host engine answers, C(dcgmi diag -r
        <dcgm_level> -j), and return their outputs in C(nodeprep_dcgm) for the readiness check C(gpu.dcgm_diag).
        Level 1 takes about a minute.
      - Without C(dcgmi) in C(PATH) nothing is run (C(nodeprep_dcgm.dcgmi) is null).
    type: bool
    default: false
  dcgm_level:
    description: The diagnostic level of O(dcgm_diag) (C(dcgmi diag -r); 1 quick, 2 medium, 3 long, 4 extended).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  dcgm_timeout:
    description: Seconds C(dcgmi diag) may take; then it is killed (C(nodeprep_dcgm.diag.timed_out)).
    type: int
    default: 300
  perf_tools:
    description:
      - Also run the performance gates' tools, one after the other, and return their outputs in C(nodeprep_perf).
        The key C(all_reduce_perf) is the path of nccl-tests' C(all_reduce_perf), run as C(-b 1G -e 16G -f 2 -g
        <GPUs> -c 1) over the GPUs nvidia-smi listed in this gather. The key C(nvbandwidth) is the path of
        C(nvbandwidth), run as C(-t host_to_device_memcpy_ce device_to_host_memcpy_ce
        device_to_device_memcpy_read_ce).
      - Both load every GPU of the node. The readiness role asks for them only on a node that runs no job
        (docs/readiness.md, "Performance gates"). Empty (the default) runs nothing.
    type: dict
    default: {}
  perf_timeout:
    description: Seconds each tool of O(perf_tools) may take; then it is killed (C(nodeprep_perf.<tool>.timed_out)).
    type: int
    default: 600
  keep_gathered:
    description:
      - Subsets gathered earlier in the play that are still valid. They are added to C(nodeprep_gathered), so a role
        that re-gathers only what it changed does not make the next role gather everything again.
      - Pass C({{ ansible_facts.nodeprep_gathered | default([]) }}).
    type: list
    elements: str
    default: []
  fail_on_error:
    description:
      - When a reader fails (for example C(nvidia-smi) hangs past O(nvidia_timeout)), fail the task.
      - When V(false), the task succeeds, the error is reported in C(ansible_facts.nodeprep_errors) under the subset's
        name, and the C(nvidia) namespace says C(present=false) with the error. The readiness check uses this so that
        a broken node is reported, not skipped.
    type: bool
    default: true
seealso:
  - module: gpufleet.nodeprep.nvidia_gpu_facts
  - module: gpufleet.nodeprep.kernel_facts
  - module: gpufleet.nodeprep.limits_facts
  - module: gpufleet.nodeprep.shm_facts
  - module: gpufleet.nodeprep.nic_facts
"""

EXAMPLES = r"""
- name: Gather the whole node state once
  gpufleet.nodeprep.gpu_node_facts:
    limits_users: [root, slurm]
    limits_services: [slurmd]

- name: Only what the memlock and shm roles need
  gpufleet.nodeprep.gpu_node_facts:
    gather_subset: [limits, shm]
    limits_users: [root]

- name: Keep going when nvidia-smi hangs, and report it
  gpufleet.nodeprep.gpu_node_facts:
    nvidia_timeout: 20
    fail_on_error: false

- name: Also the units, files and packages a role manages, in the same call
  gpufleet.nodeprep.gpu_node_facts:
    units: [nvidia-persistenced, nodeprep-gpu-settings]
    files: [/etc/nccl.conf]
    packages: [nvidia-persistenced]

- name: Would a template change /etc/nccl.conf?
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.nodeprep_files['/etc/nccl.conf'].sha1
         != lookup('ansible.builtin.template', 'nccl.conf.j2') | hash('sha1') }}

- name: Re-read only the GPUs after changing them; the other subsets stay valid
  gpufleet.nodeprep.gpu_node_facts:
    gather_subset: [nvidia]
    keep_gathered: "{{ ansible_facts.nodeprep_gathered | default([]) }}"

- name: Show the GPUs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia.gpus | map(attribute='name') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: The namespaces of the subsets gathered; see each reader module for their contents.
  returned: always
  type: dict
  contains:
    nvidia:
      description: As M(gpufleet.nodeprep.nvidia_gpu_facts) returns it.
      returned: when C(nvidia) is gathered
      type: dict
      sample: {"present": true, "driver_version": "580.95.05", "attached_gpus": 8, "gpus": []}
    kernel_state:
      description: As M(gpufleet.nodeprep.kernel_facts) returns it.
      returned: when C(kernel) is gathered
      type: dict
      sample: {"running": "5.14.0-503.el9.x86_64", "default": "5.14.0-503.el9.x86_64"}
    limits:
      description:
        - As M(gpufleet.nodeprep.limits_facts) returns it. The node returns what it read (the limits files' text,
          systemd's answers, the accounts of O(limits_users), slurmd's limits); the action plugin of this module
          resolves it on the controller with the function limits_facts runs on the node, so the module ships no
          pam_limits resolution.
      returned: when C(limits) is gathered
      type: dict
      sample: {"effective": {"root": {"memlock": {"soft": "unlimited", "hard": "unlimited"}}}}
    shm:
      description: As M(gpufleet.nodeprep.shm_facts) returns it.
      returned: when C(shm) is gathered
      type: dict
      sample: {"mounted": true, "size_bytes": 68719476736}
    nics:
      description: As M(gpufleet.nodeprep.nic_facts) returns it, keyed by interface name.
      returned: when C(nic) is gathered
      type: dict
      sample: {"eth0": {"mtu": 9000}}
    imex:
      description:
        - NVIDIA IMEX as the node shows it (C(imex) subset); the imex role's plan judges it
          (plugins/module_utils/plans/_plan_imex.py).
        - C(config_path), C(config) (the config file's C(KEY=value) lines; null when it does not exist),
          C(config_error); C(nodes_path) (its C(IMEX_NODE_CONFIG_FILE)), C(nodes_file) (the state of that file, as
          C(nodeprep_files) reports a path), C(nodes) (its addresses in order; null when it does not exist),
          C(nodes_error).
        - C(channels) - C(major) (of C(nvidia-caps-imex-channels) in C(/proc/devices); null while the driver has
          not registered it), C(error), C(dir) and C(nodes) (by minor, C(0)) - the state of
          C(/dev/nvidia-caps-imex-channels) and its C(channel0) (C(exists), C(type) V(char)..., C(major), C(minor),
          C(mode), C(uid), C(gid)).
        - C(ctl) - C(nvidia-imex-ctl -c <config> -N -j) - C(path), C(ran), C(rc), C(timed_out), C(not_configured),
          C(error), C(output) (its last 2000 characters) and C(domain) (C(status) V(UP)/V(DEGRADED)/V(DOWN),
          C(timestamp), C(nodes) by index with C(host), C(status), C(version), C(hostname) and C(connections) by
          index with C(host) and C(status); null when it could not be read).
      returned: when C(imex) is gathered
      type: dict
      sample: {"config_path": "/etc/nvidia-imex/config.cfg", "nodes_path": "/etc/nvidia-imex/nodes_config.cfg",
               "nodes": ["10.0.0.1", "10.0.0.2"], "channels": {"major": 234, "nodes": {"0": {"exists": true,
               "type": "char", "major": 234, "minor": 0, "mode": "0666", "uid": 0, "gid": 0}}},
               "ctl": {"ran": true, "rc": 0, "domain": {"status": "UP", "nodes": []}}}
    nodeprep_units:
      description:
        - State of each unit of O(units), keyed by its name as given with C(.service) added when it had no suffix.
      returned: when O(units) is not empty
      type: dict
      sample: {"nvidia-persistenced.service": {"load": "loaded", "active": "active", "sub": "running",
               "enabled": "enabled", "fragment": "/usr/lib/systemd/system/nvidia-persistenced.service",
               "dropins": []}}
      contains:
        load:
          description: C(LoadState); V(not-found) for a unit that does not exist.
          type: str
          sample: loaded
        active:
          description: C(ActiveState), such as V(active), V(inactive), V(failed).
          type: str
          sample: active
        sub:
          description: C(SubState), such as V(running), V(exited), V(dead).
          type: str
          sample: running
        enabled:
          description: C(UnitFileState), such as V(enabled), V(disabled), V(static); null when systemd gives none.
          type: str
          sample: enabled
        fragment:
          description: C(FragmentPath), the unit file systemd loaded; null when none.
          type: str
          sample: /etc/systemd/system/nodeprep-gpu-settings.service
        dropins:
          description: C(DropInPaths), the drop-in files systemd applies to the unit.
          type: list
          elements: str
          sample: [/etc/systemd/system/slurmd.service.d/nodeprep-memlock.conf]
    nodeprep_units_error:
      description: Why the units could not be read (no systemd, no systemctl, systemctl failed); then C(nodeprep_units)
        is empty. Absent when they were read.
      returned: when O(units) is not empty and they could not be read
      type: str
      sample: this host was not booted with systemd (/run/systemd/system is missing)
    nodeprep_files:
      description: State of each path of O(files), keyed by the path.
      returned: when O(files) is not empty
      type: dict
      sample: {"/etc/nccl.conf": {"exists": true, "type": "file", "mode": "0644", "uid": 0, "gid": 0, "size": 42,
               "sha1": "0a4d55a8d778e5022fab701977c5d840bbc486d0", "target": null}}
      contains:
        exists:
          description: Whether the path exists (a dangling link exists).
          type: bool
          sample: true
        type:
          description: V(file), V(directory), V(link) or V(other); null when the path does not exist.
          type: str
          sample: file
        mode:
          description: Permission bits as 4 octal digits; null when the path does not exist.
          type: str
          sample: "0644"
        uid:
          description: Owner's uid; null when the path does not exist.
          type: int
          sample: 0
        gid:
          description: Group's gid; null when the path does not exist.
          type: int
          sample: 0
        size:
          description: Size in bytes (of the link itself for a link); null when the path does not exist.
          type: int
          sample: 42
        sha1:
          description: Hex SHA-1 of a regular file's content up to 1 MiB; null otherwise (also when unreadable).
          type: str
          sample: 0a4d55a8d778e5022fab701977c5d840bbc486d0
        target:
          description: The target of a link; null otherwise.
          type: str
          sample: /dev/null
    nodeprep_packages:
      description:
        - Installed version of each package of O(packages), V(version-release) or V(epoch:version-release) when an
          epoch is set (Debian versions as dpkg prints them); null when not installed. When several versions are
          installed (kernels), the one the package manager lists last.
      returned: when O(packages) is not empty
      type: dict
      sample: {"nvidia-persistenced": "3:580.95.05-1.el9", "dkms": null}
    nodeprep_packages_error:
      description: Why the packages could not be read; then every version is null. Absent when they were read.
      returned: when O(packages) is not empty and they could not be read
      type: str
      sample: neither dpkg-query nor rpm found in PATH
    nodeprep_contents:
      description:
        - Text of each path of O(contents) (UTF-8, undecodable bytes replaced); null when it does not exist, cannot be
          read or is larger than 64 KiB.
      returned: when O(contents) is not empty
      type: dict
      sample: {"/proc/sys/kernel/random/boot_id": "0b6b6c2e-6b55-4f4e-9d1c-4e5f0e7f1a2b\n"}
    nodeprep_kernel_log:
      description:
        - The Xid lines of the kernel log (C(lines); null when it could not be read), the command read (C(source)) and
          why it could not be read (C(error)).
      returned: when O(kernel_log_lines) is above 0
      type: dict
      sample: {"source": "journalctl -k -b 0 (last 20000 lines)", "lines": [], "error": null}
    nodeprep_dcgm:
      description:
        - What O(dcgm_diag) ran - C(enabled), C(level), C(timeout), C(dcgmi) (its path, or null when DCGM is not
          installed), and per command (C(discovery), C(diag)) its C(rc), C(stdout), C(stderr) and C(timed_out); no
          C(diag) when the discovery found no host engine.
      returned: when O(dcgm_diag) is true
      type: dict
    nodeprep_perf:
      description:
        - What O(perf_tools) ran, per tool - C(path), C(argv), C(rc) (127 when it cannot be run, null when nvidia-smi
          listed no GPU and nothing ran), C(stdout), C(stderr), C(timed_out), C(timeout) and C(seconds).
      returned: when O(perf_tools) is not empty
      type: dict
    nodeprep_gathered:
      description:
        - The subsets gathered by this call, plus those of O(keep_gathered); V(units), V(files), V(packages),
          V(contents), V(kernel_log), V(dcgm) and V(perf) when those options were given.
      returned: always
      type: list
      elements: str
      sample: [nvidia, kernel, limits, shm, nic, units, files]
    nodeprep_errors:
      description: Subset name to error message, for readers that failed while O(fail_on_error=false).
      returned: always
      type: dict
      sample: {"nvidia": "nvidia-smi -q -x did not answer within the timeout of 60 seconds and was killed"}
    nodeprep_timings:
      description:
        - Seconds each reader of this call took on the host, by subset name. Facts modules return only facts, so
          this is a fact too (earlier versions returned it as a top-level C(timings) key).
      returned: always
      type: dict
      sample: {"nvidia": 0.412, "kernel": 0.021}
    nodeprep_timed_out:
      description:
        - The commands killed at their limit, each with C(command), C(seconds) and C(option) (the option that set the
          limit, V(nvidia_timeout) or V(command_timeout)). A failed task returns the same list as C(timed_out).
      returned: when a command was killed at its limit
      type: list
      elements: dict
      sample: [{"command": "/usr/bin/nvidia-smi -q -x", "seconds": 60, "option": "nvidia_timeout"}]
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nvidia_smi import (
    NvidiaCollectError,
    NvidiaSmiTimeout,
    collect_nvidia_facts,
    collect_nvlink,
    collect_topology,
    empty_facts,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import KernelError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._kernel_state import collect_kernel_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._limits import read_limits
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import ShmError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._shm_state import collect_shm_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic import collect_nic_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import EthtoolError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._imex_state import collect_imex_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import ImexError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import (
    NodeStateError,
    check_file_path,
    check_package_name,
    unit_name,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import (
    collect_contents,
    collect_files,
    collect_packages,
    collect_units,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import (
    exit_facts,
    facts_warnings,
    fail_kwargs,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import (
    CommandError,
    command_limit,
    forget_timeouts,
    timed_out_commands,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._health import read_dcgm, read_kernel_log, \
    read_perf

SUBSETS = ('nvidia', 'kernel', 'limits', 'shm', 'nic', 'imex')
# What gather_subset: all runs (imex only when named: nvidia-imex-ctl -N asks every peer).
ALL_SUBSETS = ('nvidia', 'kernel', 'limits', 'shm', 'nic')
# Read only when their option lists something; kept by keep_gathered like the others.
STATE_SUBSETS = ('units', 'files', 'packages', 'contents', 'kernel_log', 'dcgm', 'perf')
NAMESPACE = {'nvidia': 'nvidia', 'kernel': 'kernel_state', 'limits': 'limits', 'shm': 'shm', 'nic': 'nics',
             'imex': 'imex'}
# The shared memory mount point that is reported, not a place for temporary files.
SHM_PATH = '/dev/shm'  # nosec B108
READER_ERRORS = (NvidiaCollectError, KernelError, ShmError, NicError, EthtoolError, ImexError, CommandError, IOError,
                 OSError)


def nvidia_limit(module):
    """(seconds, option) of nvidia-smi's limit: nvidia_timeout when given, else command_timeout."""
    if module.params['nvidia_timeout'] is not None:
        return module.params['nvidia_timeout'], 'nvidia_timeout'
    return command_limit(module), 'command_timeout'


def wanted_subsets(requested):
    """Subsets to gather, in a fixed order, from the gather_subset option."""
    if 'all' in requested:
        return [name for name in SUBSETS if name in ALL_SUBSETS or name in requested]
    return [name for name in SUBSETS if name in requested]


def gather(module, subsets):
    """Run the readers; return (facts, errors, failure) where failure is the first exception's details."""
    params = module.params
    nvidia_timeout, nvidia_option = nvidia_limit(module)
    readers = {
        'nvidia': lambda: collect_nvidia_facts(module, timeout=nvidia_timeout,
                                               include_supported_clocks=params['nvidia_supported_clocks'],
                                               nvidia_smi=params['nvidia_smi'], option=nvidia_option),
        'kernel': lambda: collect_kernel_facts(module),
        # What the node holds; the action plugin of the same name resolves it on the controller.
        'limits': lambda: {'read': read_limits(module, users=params['limits_users'],
                                               services=params['limits_services'])},
        'shm': lambda: collect_shm_facts(module, path=params['shm_path']),
        'nic': lambda: collect_nic_facts(module, interfaces=params['nic_interfaces'] or None,
                                         networks=params['nic_networks'] or None,
                                         nm_properties=params['nic_nm_properties']),
        'imex': lambda: collect_imex_facts(module, config_path=params['imex_config'], timeout=params['imex_timeout']),
    }
    facts, errors, timings = {}, {}, {}
    for name in subsets:
        started = time.time()
        try:
            facts[NAMESPACE[name]] = readers[name]()
            if name == 'nvidia' and facts['nvidia'].get('partial'):
                # nvidia-smi printed some GPUs, then failed (15: a GPU fell off the bus): keep them, report it.
                errors[name] = 'nvidia facts: partial, nvidia-smi failed after printing {0} GPUs: {1}'.format(
                    len(facts['nvidia']['gpus']), facts['nvidia']['error'])
        except READER_ERRORS as exc:
            message = '{0} facts: {1}'.format(name, exc)
            if params['fail_on_error']:
                module.fail_json(subset=name, timed_out=timed_out_commands(),
                                 **fail_kwargs(exc, '{0} facts: '.format(name)))
            errors[name] = message
            if name == 'nvidia':
                facts['nvidia'] = empty_facts(str(exc))
                facts['nvidia']['timed_out'] = isinstance(exc, NvidiaSmiTimeout)
        timings[name] = round(time.time() - started, 3)
        if name == 'nvidia' and params['nvidia_topology']:
            nvidia = facts['nvidia']
            if nvidia.get('nvidia_smi') and len(nvidia.get('gpus') or []) >= 2:
                started = time.time()
                nvidia['topology'] = collect_topology(module, nvidia['nvidia_smi'], nvidia_timeout, nvidia_option)
                timings['nvidia_topology'] = round(time.time() - started, 3)
        if name == 'nvidia' and params['nvidia_nvlink']:
            nvidia = facts['nvidia']
            if nvidia.get('nvidia_smi') and nvidia.get('gpus'):
                started = time.time()
                nvidia['nvlink'] = collect_nvlink(module, nvidia['nvidia_smi'], params['nvidia_timeout'])
                timings['nvidia_nvlink'] = round(time.time() - started, 3)
    return facts, errors, timings


def check_state_options(module):
    """Fail before reading anything when a unit, path or package name is not one."""
    checks = (('units', unit_name), ('files', check_file_path), ('packages', check_package_name),
              ('contents', check_file_path))
    for option, check in checks:
        for value in module.params[option]:
            try:
                check(value)
            except NodeStateError as exc:
                module.fail_json(msg=str(exc), option=option, value=value)


def gather_state(module, facts, timings):
    """Read the units, files and packages asked for (into facts); return the state subsets read."""
    params = module.params
    done = []
    if params['units']:
        started = time.time()
        facts['nodeprep_units'], error = collect_units(module, params['units'])
        if error:
            facts['nodeprep_units_error'] = error
        timings['units'] = round(time.time() - started, 3)
        done.append('units')
    if params['files']:
        started = time.time()
        try:
            facts['nodeprep_files'] = collect_files(params['files'])
        except (IOError, OSError) as exc:
            module.fail_json(msg='files: cannot read the state of {0}: {1}'.format(
                getattr(exc, 'filename', None) or params['files'], exc), option='files')
        timings['files'] = round(time.time() - started, 3)
        done.append('files')
    if params['packages']:
        started = time.time()
        facts['nodeprep_packages'], error = collect_packages(module, params['packages'])
        if error:
            facts['nodeprep_packages_error'] = error
        timings['packages'] = round(time.time() - started, 3)
        done.append('packages')
    if params['contents']:
        started = time.time()
        facts['nodeprep_contents'] = collect_contents(params['contents'])
        timings['contents'] = round(time.time() - started, 3)
        done.append('contents')
    if params['kernel_log_lines']:
        started = time.time()
        facts['nodeprep_kernel_log'] = read_kernel_log(module, params['kernel_log_lines'])
        timings['kernel_log'] = round(time.time() - started, 3)
        done.append('kernel_log')
    if params['dcgm_diag']:
        started = time.time()
        facts['nodeprep_dcgm'] = read_dcgm(module, params['dcgm_level'], params['dcgm_timeout'])
        timings['dcgm'] = round(time.time() - started, 3)
        done.append('dcgm')
    if params['perf_tools']:
        started = time.time()
        nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
        facts['nodeprep_perf'] = read_perf(module, params['perf_tools'], len(nvidia.get('gpus') or []),
                                           params['perf_timeout'])
        timings['perf'] = round(time.time() - started, 3)
        done.append('perf')
    return done


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gather_subset=dict(type='list', elements='str', default=['all'], choices=['all'] + list(SUBSETS)),
            nvidia_timeout=dict(type='int'),
            command_timeout=dict(type='int', default=60),
            nvidia_supported_clocks=dict(type='bool', default=True),
            nvidia_smi=dict(type='path'),
            nvidia_topology=dict(type='bool', default=False),
            nvidia_nvlink=dict(type='bool', default=False),
            limits_users=dict(type='list', elements='str', default=[]),
            limits_services=dict(type='list', elements='str', default=[]),
            nic_interfaces=dict(type='list', elements='str', default=[]),
            nic_networks=dict(type='list', elements='str', default=[]),
            nic_nm_properties=dict(type='list', elements='str', default=[]),
            shm_path=dict(type='path', default=SHM_PATH),
            imex_config=dict(type='path', default='/etc/nvidia-imex/config.cfg'),
            imex_timeout=dict(type='int', default=30),
            units=dict(type='list', elements='str', default=[]),
            files=dict(type='list', elements='str', default=[]),
            packages=dict(type='list', elements='str', default=[]),
            contents=dict(type='list', elements='str', default=[]),
            kernel_log_lines=dict(type='int', default=0),
            dcgm_diag=dict(type='bool', default=False),
            dcgm_level=dict(type='int', choices=[1, 2, 3, 4], default=1),
            dcgm_timeout=dict(type='int', default=300),
            perf_tools=dict(type='dict', default={}),
            perf_timeout=dict(type='int', default=600),
            keep_gathered=dict(type='list', elements='str', default=[]),
            fail_on_error=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    forget_timeouts()   # one module execution is one process; an in-process caller (the unit tests) runs it again
    for option in ('nvidia_timeout', 'command_timeout', 'imex_timeout'):
        if module.params[option] is not None and module.params[option] < 1:
            module.fail_json(msg='{0} must be at least 1 second, got {1}'.format(option, module.params[option]))
    if module.params['kernel_log_lines'] < 0:
        module.fail_json(msg='kernel_log_lines={0} is negative; allowed: 0 (do not read the kernel log) or a positive '
                             'number of lines'.format(module.params['kernel_log_lines']))
    if module.params['dcgm_timeout'] < 1:
        module.fail_json(msg='dcgm_timeout={0} is not a timeout; allowed: a whole number of seconds, at least 1 (level '
                             '1 takes about a minute)'.format(module.params['dcgm_timeout']))
    if module.params['perf_timeout'] < 1:
        module.fail_json(msg='perf_timeout={0} is not a timeout; allowed: a whole number of seconds, at least 1'.format(
            module.params['perf_timeout']))
    unknown = sorted(set(module.params['perf_tools']) - set(('all_reduce_perf', 'nvbandwidth')))
    if unknown:
        module.fail_json(msg='perf_tools: unknown tools {0}; allowed: all_reduce_perf, nvbandwidth'.format(
            ', '.join(unknown)))
    check_state_options(module)
    subsets = wanted_subsets(module.params['gather_subset'])
    facts, errors, timings = gather(module, subsets)
    state_subsets = gather_state(module, facts, timings)
    warnings = []
    for namespace in ('kernel_state', 'shm'):
        warnings.extend(facts_warnings(facts.get(namespace), '{0}: '.format(namespace)))
    done = subsets + state_subsets
    facts['nodeprep_gathered'] = [name for name in SUBSETS + STATE_SUBSETS
                                  if name in done or name in module.params['keep_gathered']]
    facts['nodeprep_errors'] = errors
    facts['nodeprep_timings'] = timings
    if timed_out_commands():
        facts['nodeprep_timed_out'] = timed_out_commands()
    exit_facts(module, facts, warnings)


if __name__ == '__main__':
    main()
