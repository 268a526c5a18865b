#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: readiness_info
short_description: Check that a GPU node is in the state the gpufleet.nodeprep roles leave it in
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Evaluates the readiness checks of the P(gpufleet.nodeprep.readiness#role) role on one node and returns them.
  - Takes the facts that M(gpufleet.nodeprep.gpu_node_facts) gathered (passed in O(facts), so the node is asked only
    once) and reads on the node what those facts do not hold, in the same call - the
    NVIDIA Xid lines of the kernel log of the current boot and the state of a few systemd units (returned only).
    The files the roles write (such as C(/etc/nccl.conf)) are judged by the roles' plans (O(plans)), by SHA-1; no file's
    content is read or sent back.
  - Each check has a stable id, a status (V(pass), V(warn), V(fail), V(skip)), what was expected, what was observed
    and the role or playbook that fixes it. The check ids are C(kernel.devel_matched), C(driver.nouveau_blacklisted),
    C(driver.loaded), C(driver.open_modules), C(driver.persistenced), C(gpu.count), C(gpu.power_limit),
    C(gpu.clocks), C(gpu.health), C(memlock.users), C(memlock.services), C(shm.size), C(nccl.config),
    C(nic.offload), C(fabric.manager) and C(gpu.dcgm_diag).
  - Also returns the values the checks looked at (RV(checked_values)), for the report.
  - Never changes the node. Called C(gpufleet.nodeprep.readiness_check) in development versions before the first
    release; that name redirects here until 1.0.0.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  facts:
    description:
      - The fact namespaces gathered by M(gpufleet.nodeprep.gpu_node_facts) - C(nvidia), C(kernel_state), C(limits),
        C(shm) and C(nics) (see the collection's docs/contracts.md).
      - Also C(nodeprep_errors) (subset to message, what M(gpufleet.nodeprep.gpu_node_facts) sets with
        C(fail_on_error=false)). A namespace that could not be read fails the checks that need it; it never turns
        them into V(skip) or V(pass).
      - A namespace left out (not asked for, no error) turns the checks that need it into V(skip).
    type: dict
    required: true
  settings:
    description:
      - The role variables the checks compare against, by their names (for example
        C(nodeprep_shm_size), C(nodeprep_expected_gpus)).
      - Every variable the checks read must be given; a missing one is refused with its name. The
        P(gpufleet.nodeprep.readiness#role) role builds this dict from the inventory and the owning roles'
        documented defaults; docs/readiness.md lists every name.
    type: dict
    required: true
  plans:
    description:
      - The roles' plans for this node (C(ansible_facts.nodeprep_plans), made by M(gpufleet.nodeprep.node_plan)).
        A check owned by a role that plans in Python passes exactly when that role's plan has no drift for it.
    type: dict
    default: {}
  services:
    description:
      - systemd units whose state is read and returned (RV(probe.services)). The checks owned by a role judge the
        units as that role's plan read them (O(plans); the gather's C(nodeprep_units)).
    type: list
    elements: str
    default: [nvidia-persistenced.service, nvidia-fabricmanager.service, nodeprep-gpu-settings.service]
  dcgm:
    description:
      - Run NVIDIA DCGM's diagnostic (C(dcgmi discovery -l), then C(dcgmi diag -r <dcgm_level> -j)) for the check
        C(gpu.dcgm_diag). Level 1 takes about a minute.
      - V(false) reports C(gpu.dcgm_diag) as skipped. A node without C(dcgmi), or whose host engine
        (C(nvidia-dcgm.service)) does not answer, skips it with that reason.
    type: bool
    default: false
  dcgm_level:
    description: The diagnostic level, C(dcgmi diag -r) (1 quick, 2 medium, 3 long, 4 extended).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  dcgm_timeout:
    description:
      - Seconds C(dcgmi diag) may take; then it is killed and C(gpu.dcgm_diag) fails saying so.
    type: int
    default: 300
  command_timeout:
    description:
      - Seconds each other command (C(journalctl), C(dmesg), C(systemctl)) may take; then it is killed (coreutils
        C(timeout)) and the check that needed it says so. Unset, they have no limit. The readiness role sets it from
        C(nodeprep_command_timeout).
    type: int
  kernel_log_lines:
    description:
      - How many of the last kernel log lines of the current boot to search for NVIDIA Xid events
        (C(journalctl -k -b 0), or C(dmesg) where journald is not available).
      - V(0) does not read the kernel log.
    type: int
    default: 20000
attributes:
  check_mode:
    support: full
  diff_mode:
    support: N/A
    details:
      - Nothing on the node changes.
notes:
  - Reading the kernel log may need root; run it with become.
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
  - module: gpufleet.nodeprep.readiness_report
"""

EXAMPLES = r"""
- name: Gather the node's facts once
  gpufleet.nodeprep.gpu_node_facts:

- name: Check the node (the readiness role passes every setting; docs/readiness.md lists them)
  gpufleet.nodeprep.readiness_info:
    facts:
      nvidia: "{{ ansible_facts.nvidia }}"
      kernel_state: "{{ ansible_facts.kernel_state }}"
      limits: "{{ ansible_facts.limits }}"
      shm: "{{ ansible_facts.shm }}"
      nics: "{{ ansible_facts.nics }}"
      nodeprep_errors: "{{ ansible_facts.nodeprep_errors }}"
    settings: "{{ my_readiness_settings }}"
  become: true
  register: readiness

- name: Show what failed
  ansible.builtin.debug:
    msg: "{{ readiness.checks | selectattr('status', 'equalto', 'fail') | list }}"
"""

RETURN = r"""
checks:
  description: One entry per check, in the order of the check ids above.
  returned: success
  type: list
  elements: dict
  contains:
    id:
      description: The check id.
      type: str
      sample: gpu.count
    status:
      description: V(pass), V(warn), V(fail) or V(skip).
      type: str
      sample: fail
    expected:
      description: What a ready node shows.
      type: str
      sample: 8 GPUs in nvidia-smi and on the PCI bus (nodeprep_expected_gpus)
    observed:
      description: What this node shows.
      type: str
      sample: "nvidia-smi: 7, PCI bus: 8; missing from nvidia-smi: 0000:3b:00.0"
    remedy:
      description: The role or playbook that fixes it.
      type: str
      sample: playbooks/recover_gpu.yml (GPU missing from nvidia-smi)
summary:
  description: How many checks ended in each status, and the node's overall C(status) (the worst one).
  returned: success
  type: dict
  sample: {pass: 12, warn: 1, fail: 0, skip: 2, status: warn}
  contains:
    pass:
      description: Checks that passed.
      type: int
    warn:
      description: Checks that warned.
      type: int
    fail:
      description: Checks that failed.
      type: int
    skip:
      description: Checks skipped (not configured, or not applicable to the node).
      type: int
    status:
      description: The worst status of all checks.
      type: str
ready:
  description: True when no check failed.
  returned: success
  type: bool
  sample: true
lost_gpus:
  description:
    - GPUs the PCI bus shows but nvidia-smi does not list, with sysfs-style bus ids (all of them when nvidia-smi
      failed or timed out). Used by the collection's playbooks/recover_gpu.yml.
  returned: success
  type: list
  elements: dict
  sample: [{bus_id: "0000:3b:00.0", reason: "on the PCI bus, not listed by nvidia-smi"}]
  contains:
    bus_id:
      description: PCI address as sysfs names it.
      type: str
    reason:
      description: Why the GPU counts as lost.
      type: str
checked_values:
  description:
    - The values the checks looked at, as C([label, text]) pairs in a fixed order, for the report (GPUs and
      driver, power limit in W and in % of the default, clocks, GPU memory, C(/dev/shm) against GPU memory,
      memlock, NICs and their offloads, NCCL file, NVSwitch fabric). A value that could not be read says so.
  returned: success
  type: list
  elements: list
  sample: [[power limit, "700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs"]]
probe:
  description: What the module read on the node besides the facts.
  returned: success
  type: dict
  contains:
    kernel_log:
      description: The kernel log lines read for Xid events.
      type: dict
      contains:
        source:
          description: The command read.
          type: str
        lines:
          description: The Xid lines found; null when the log was not read.
          type: list
          elements: str
        error:
          description: Why the log could not be read, or null.
          type: str
    dcgm:
      description:
        - What was run for C(gpu.dcgm_diag) - C(enabled), C(level), C(timeout), C(dcgmi) (its path, or null when
          DCGM is not installed), and per command (C(discovery), C(diag)) its C(rc), C(stdout), C(stderr) and
          C(timed_out).
      type: dict
    services:
      description:
        - Per unit - C(load_state), C(active_state) and C(unit_file_state) as systemctl reports them.
        - 'C([<unit>]) (dict): One entry per unit read.'
        - 'C([<unit>].load_state) (str): C(LoadState) (V(loaded), V(not-found), ...).'
        - 'C([<unit>].active_state) (str): C(ActiveState) (V(active), V(failed), ...).'
        - 'C([<unit>].unit_file_state) (str): C(UnitFileState) (V(enabled), V(disabled), ...).'
      type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import (
    parse_units_show,
    units_argv,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness import (
    ReadinessError,
    checked_values,
    evaluate,
    find_lost_gpus,
    summarize,
    FAIL,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dcgm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run, run_status

_SYSTEMD_RUN_DIR = '/run/systemd/system'


def read_kernel_log(module, lines):
    """Xid lines of the kernel log of this boot: journalctl first, dmesg where journald is not there."""
    result = {'source': None, 'lines': None, 'error': None}
    if lines <= 0:
        result['error'] = 'not read (kernel_log_lines is {0})'.format(lines)
        return result
    errors = []
    journalctl = module.get_bin_path('journalctl')
    if journalctl:
        argv = [journalctl, '-k', '-b', '0', '--no-pager', '-q', '-o', 'short-iso', '-n', str(lines)]
        rc, out, err = run_status(module, argv)
        if rc == 0:
            result['source'] = 'journalctl -k -b 0 (last {0} lines)'.format(lines)
            result['lines'] = [line for line in out.splitlines() if 'NVRM: Xid' in line]
            return result
        errors.append('journalctl rc={0}: {1}'.format(rc, err.strip()))
    dmesg = module.get_bin_path('dmesg')
    if dmesg:
        rc, out, err = run_status(module, [dmesg])
        if rc == 0:
            result['source'] = 'dmesg (last {0} lines)'.format(lines)
            result['lines'] = [line for line in out.splitlines()[-lines:] if 'NVRM: Xid' in line]
            return result
        errors.append('dmesg rc={0}: {1}'.format(rc, err.strip()))
    result['error'] = '; '.join(errors) or 'neither journalctl nor dmesg found'
    return result


def read_services(module, names):
    """State of each unit in ``names`` from one ``systemctl show`` call, keyed by the names given."""
    if not names:
        return {}
    systemctl = module.get_bin_path('systemctl')
    reason = None
    if not systemctl:
        reason = 'systemctl not found'
    elif not os.path.isdir(_SYSTEMD_RUN_DIR):
        reason = 'not booted with systemd ({0} is missing)'.format(_SYSTEMD_RUN_DIR)
    if reason:
        return dict((name, {'load_state': None, 'active_state': None, 'unit_file_state': None,
                            'error': reason}) for name in names)
    argv = units_argv(systemctl, names)
    rc, out, err = run_status(module, argv)
    if rc != 0:
        module.fail_json(msg='systemctl show failed for units {0}'.format(', '.join(names)), rc=rc, stdout=out,
                         stderr=err, cmd=argv)
    records = parse_units_show(out, list(names))
    return dict((name, {'load_state': records[name]['load'], 'active_state': records[name]['active'],
                        'unit_file_state': records[name]['enabled']}) for name in names)


# Seconds dcgmi discovery -l may take (it only asks the host engine).
DCGM_DISCOVERY_TIMEOUT = 60


def _dcgm_command(module, argv, timeout):
    try:
        result = run(module, argv, timeout=timeout, option='dcgm_timeout')
    except CommandNotFound as exc:
        return {'rc': 127, 'stdout': '', 'stderr': str(exc), 'timed_out': False}
    return {'rc': result.rc, 'stdout': result.stdout, 'stderr': result.stderr, 'timed_out': result.timed_out}


def read_dcgm(module, enabled, level, timeout):
    """What gpu.dcgm_diag needs (_dcgm.judge): nothing when disabled or without dcgmi; else DCGM's discovery and,
    when a host engine answers it, its diagnostic."""
    probe = {'enabled': bool(enabled), 'level': level, 'timeout': timeout, 'dcgmi': None}
    if not enabled:
        return probe
    dcgmi = module.get_bin_path('dcgmi')
    probe['dcgmi'] = dcgmi
    if not dcgmi:
        return probe
    probe['discovery'] = _dcgm_command(module, _dcgmi.discovery_argv(dcgmi), min(timeout, DCGM_DISCOVERY_TIMEOUT))
    both = probe['discovery']['stdout'] + probe['discovery']['stderr']
    if _dcgmi.no_host_engine(both):
        return probe
    probe['diag'] = _dcgm_command(module, _dcgmi.diag_argv(dcgmi, level), timeout)
    return probe


def run_checks(module):
    params = module.params
    settings = dict(params['settings'] or {})
    probe = {
        'kernel_log': read_kernel_log(module, params['kernel_log_lines']),
        'services': read_services(module, params['services']),
        'dcgm': read_dcgm(module, params['dcgm'], params['dcgm_level'], params['dcgm_timeout']),
    }
    try:
        checks = evaluate(params['facts'], settings, probe, params['plans'])
        lost = find_lost_gpus(params['facts'])
        values = checked_values(params['facts'], settings, probe, params['plans'])
    except ReadinessError as exc:
        module.fail_json(msg='readiness check: {0}'.format(exc))
    summary = summarize(checks)
    return {
        'changed': False,
        'checks': checks,
        'summary': summary,
        'ready': summary['status'] != FAIL,
        'lost_gpus': lost,
        'checked_values': values,
        'probe': probe,
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            facts=dict(type='dict', required=True),
            settings=dict(type='dict', required=True),
            plans=dict(type='dict', default={}),
            services=dict(type='list', elements='str',
                          default=['nvidia-persistenced.service', 'nvidia-fabricmanager.service',
                                   'nodeprep-gpu-settings.service']),
            kernel_log_lines=dict(type='int', default=20000),
            dcgm=dict(type='bool', default=False),
            dcgm_level=dict(type='int', choices=list(_dcgm.LEVELS), default=_dcgm.DEFAULT_LEVEL),
            dcgm_timeout=dict(type='int', default=_dcgm.DEFAULT_TIMEOUT),
            command_timeout=dict(type='int'),
        ),
        supports_check_mode=True,
    )
    if module.params['command_timeout'] is not None and module.params['command_timeout'] < 1:
        module.fail_json(msg='command_timeout must be at least 1 second, got {0}'.format(
            module.params['command_timeout']))
    if module.params['kernel_log_lines'] < 0:
        module.fail_json(msg='kernel_log_lines={0} is negative; allowed: 0 (do not read the kernel log) or a positive '
                             'number of lines'.format(module.params['kernel_log_lines']))
    try:
        _dcgm.check_timeout(module.params['dcgm_timeout'], 'dcgm_timeout')
    except _dcgmi.DcgmError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**run_checks(module))


if __name__ == '__main__':
    main()
