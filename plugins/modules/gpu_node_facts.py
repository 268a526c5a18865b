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
  - The roles of this collection call it once per play.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
options:
  gather_subset:
    description:
      - Which readers to run. V(all) runs every one.
    type: list
    elements: str
    choices: [all, nvidia, kernel, limits, shm, nic]
    default: [all]
  nvidia_timeout:
    description: Seconds to wait for C(nvidia-smi -q -x) before killing it (it can hang when a GPU fell off the bus).
    type: int
    default: 60
  nvidia_supported_clocks:
    description: Include each GPU's supported clocks table (large).
    type: bool
    default: true
  nvidia_smi:
    description: Path of C(nvidia-smi). By default it is looked up in C(PATH), C(/usr/bin) and C(/usr/local/bin).
    type: path
  limits_users:
    description: Users whose effective pam_limits values are reported under C(limits.effective).
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
  shm_path:
    description: The shared memory mount point to report.
    type: path
    default: /dev/shm
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
      description: As M(gpufleet.nodeprep.limits_facts) returns it.
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
    nodeprep_gathered:
      description: The subsets gathered by this call, plus those of O(keep_gathered).
      returned: always
      type: list
      elements: str
      sample: [nvidia, kernel, limits, shm, nic]
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
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nvidia_collect import (
    NvidiaCollectError, NvidiaSmiTimeout, collect_nvidia_facts, empty_facts)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._kernel import KernelError, collect_kernel_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._limits import LimitsError, collect_limits_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._shm import ShmError, collect_shm_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nic import NicError, collect_nic_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._ethtool import EthtoolError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._facts_module import (
    exit_facts, facts_warnings, fail_kwargs)

SUBSETS = ('nvidia', 'kernel', 'limits', 'shm', 'nic')
NAMESPACE = {'nvidia': 'nvidia', 'kernel': 'kernel_state', 'limits': 'limits', 'shm': 'shm', 'nic': 'nics'}
# The shared memory mount point that is reported, not a place for temporary files.
SHM_PATH = '/dev/shm'  # nosec B108
READER_ERRORS = (NvidiaCollectError, KernelError, LimitsError, ShmError, NicError, EthtoolError, IOError, OSError)


def wanted_subsets(requested):
    """Subsets to gather, in a fixed order, from the gather_subset option."""
    if 'all' in requested:
        return list(SUBSETS)
    return [name for name in SUBSETS if name in requested]


def gather(module, subsets):
    """Run the readers; return (facts, errors, failure) where failure is the first exception's details."""
    params = module.params
    readers = {
        'nvidia': lambda: collect_nvidia_facts(module, timeout=params['nvidia_timeout'],
                                               include_supported_clocks=params['nvidia_supported_clocks'],
                                               nvidia_smi=params['nvidia_smi']),
        'kernel': lambda: collect_kernel_facts(module),
        'limits': lambda: collect_limits_facts(module, users=params['limits_users'],
                                               services=params['limits_services']),
        'shm': lambda: collect_shm_facts(module, path=params['shm_path']),
        'nic': lambda: collect_nic_facts(module, interfaces=params['nic_interfaces'] or None,
                                         networks=params['nic_networks'] or None),
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
                module.fail_json(subset=name, **fail_kwargs(exc, '{0} facts: '.format(name)))
            errors[name] = message
            if name == 'nvidia':
                facts['nvidia'] = empty_facts(str(exc))
                facts['nvidia']['timed_out'] = isinstance(exc, NvidiaSmiTimeout)
        timings[name] = round(time.time() - started, 3)
    return facts, errors, timings


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gather_subset=dict(type='list', elements='str', default=['all'], choices=['all'] + list(SUBSETS)),
            nvidia_timeout=dict(type='int', default=60),
            nvidia_supported_clocks=dict(type='bool', default=True),
            nvidia_smi=dict(type='path'),
            limits_users=dict(type='list', elements='str', default=[]),
            limits_services=dict(type='list', elements='str', default=[]),
            nic_interfaces=dict(type='list', elements='str', default=[]),
            nic_networks=dict(type='list', elements='str', default=[]),
            shm_path=dict(type='path', default=SHM_PATH),
            keep_gathered=dict(type='list', elements='str', default=[]),
            fail_on_error=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    if module.params['nvidia_timeout'] < 1:
        module.fail_json(msg='nvidia_timeout must be at least 1 second, got {0}'.format(module.params['nvidia_timeout']))
    module.run_command_environ_update = {'LC_ALL': 'C', 'LANGUAGE': 'C'}
    subsets = wanted_subsets(module.params['gather_subset'])
    facts, errors, timings = gather(module, subsets)
    warnings = []
    for namespace in ('kernel_state', 'limits', 'shm'):
        warnings.extend(facts_warnings(facts.get(namespace), '{0}: '.format(namespace)))
    kept = [name for name in SUBSETS if name in module.params['keep_gathered'] and name not in subsets]
    facts['nodeprep_gathered'] = [name for name in SUBSETS if name in subsets or name in kept]
    facts['nodeprep_errors'] = errors
    facts['nodeprep_timings'] = timings
    exit_facts(module, facts, warnings)


if __name__ == '__main__':
    main()
