#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/readiness_info.py (the node runs one
# gpufleet.nodeprep.gpu_node_facts); this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: readiness_info
short_description: Check that a GPU node is in the state the gpufleet.nodeprep roles leave it in
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Evaluates the readiness checks of the P(gpufleet.nodeprep.readiness#role) role for one node and returns them.
  - Runs one M(gpufleet.nodeprep.gpu_node_facts) on the node (one module execution) that reads everything the checks
    need - the facts of the roles, the NVIDIA Xid lines of the kernel log of the current boot and, opt-in, NVIDIA
    DCGM's diagnostic - and judges on the controller, with no second module call and no plan sent to the node.
  - Types the variables once, as the play sees them for the host - every role's (the same SETTINGS the roles and
    M(gpufleet.nodeprep.node_plan) type them with) and the readiness role's own (C(nodeprep_readiness_*)); a variable
    the inventory leaves unset takes its documented default. The checks of a role are that role's plan made from
    the same gather - a check passes exactly when the role's plan has no drift for it - so ready means what
    C(gpufleet.nodeprep.site) would leave.
  - Each check has a stable id, a status (V(pass), V(warn), V(fail), V(skip)), what was expected, what was observed
    and the role or playbook that fixes it. The check ids are C(kernel.devel_matched), C(driver.nouveau_blacklisted),
    C(driver.loaded), C(driver.open_modules), C(driver.persistenced), C(gpu.count), C(gpu.power_limit),
    C(gpu.clocks), C(gpu.health), C(memlock.users), C(memlock.services), C(shm.size), C(nccl.config),
    C(nic.offload), C(fabric.manager), C(gpu.fabric), C(gpu.topology), C(gpu.dcgm_diag), C(rdma.peer_memory),
    C(pci.acs), C(kernel.iommu), C(perf.tools), C(perf.allreduce) and C(perf.nvbandwidth).
  - The performance gates C(perf.allreduce) and C(perf.nvbandwidth) (opt-in, C(nodeprep_readiness_performance)) run
    their tools in the same gather, and only where O(node_state) (or, without a scheduler,
    C(nodeprep_readiness_node_idle)) says the node runs no job; everywhere else they skip saying why.
  - A fact that could not be read fails the checks that need it; it never makes a node look ready.
  - Also returns the values the checks looked at (RV(checked_values)), for the report.
  - Never changes the node. Called C(gpufleet.nodeprep.readiness_check) in development versions before the first
    release; that name redirects here until 1.0.0.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  checks:
    description:
      - The check ids to evaluate; by default every one. The gather reads only what these checks need, and the result
        (RV(checks), RV(summary), RV(ready)) holds only them.
      - An unknown id is refused, naming the ids there are.
    type: list
    elements: str
  node_state:
    description:
      - What the scheduler says of this node, for the performance gates; the P(gpufleet.nodeprep.readiness#role)
        role reads it once for the play (M(gpufleet.nodeprep.rolling_slurm) C(op=state) on the Slurm controller)
        and hands each node its part.
      - V(null) (the default) - no scheduler was asked; the gates run only where C(nodeprep_readiness_node_idle) is
        true.
      - Otherwise a dictionary - C(scheduler) V(slurm); C(record) the node's C(scontrol show node -o) record, or null
        when Slurm does not know the node; C(jobs) the ids of the jobs active on it; C(error) why Slurm could not be
        read, or null. A node with a job, or allocated, or completing one, never runs a gate; a drained or idle node
        does; an unreadable Slurm runs none.
    type: raw
  settings_only:
    description:
      - V(true) only types the settings (as for a check, failing the same way on one that does not type) and returns
        them in RV(settings), with RV(slurm_controller) and RV(slurm_delegate); nothing is gathered or judged. The
        P(gpufleet.nodeprep.readiness#role) role runs it once for the steps that run once (the Slurm steps, the
        report), so that they never read the variables untyped.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: N/A
    details:
      - Nothing on the node changes.
notes:
  - The variables it reads are those of P(gpufleet.nodeprep.readiness#role) - C(nodeprep_readiness_nvidia_timeout),
    C(nodeprep_readiness_kernel_log_lines), C(nodeprep_readiness_xid_fail), C(nodeprep_readiness_dcgm),
    C(nodeprep_readiness_dcgm_level), C(nodeprep_readiness_dcgm_timeout), C(nodeprep_readiness_skip_checks),
    C(nodeprep_readiness_performance), C(nodeprep_readiness_node_idle), C(nodeprep_readiness_performance_thresholds),
    C(nodeprep_readiness_performance_timeout) - and
    those of the roles that configure the node; docs/readiness.md lists them. A setting that cannot be used fails
    the task with its name, its value and what is allowed, before anything is read.
  - Reading the kernel log may need root; run it with become.
  - 'A hung node costs only itself: every command of the gather (C(systemctl), C(rpm), C(journalctl), ...) is killed
    at C(nodeprep_command_timeout) (seconds, default 60; C(nvidia-smi) at C(nodeprep_readiness_nvidia_timeout), DCGM''s
    diagnostic at C(nodeprep_readiness_dcgm_timeout)) and the check that needed it fails saying so; a connection that
    timed out names the SSH connect limit (C(ansible_ssh_timeout)). The readiness role gives the task the limit of the
    whole step, C(nodeprep_gather_timeout) (Ansible''s C(timeout) keyword; plus C(nodeprep_readiness_dcgm_timeout)
    when DCGM''s diagnostic runs).'
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
  - module: gpufleet.nodeprep.readiness_report
"""

EXAMPLES = r"""
- name: Check the node (every variable from the inventory, or its default)
  gpufleet.nodeprep.readiness_info:
  become: true
  register: readiness

- name: Show what failed
  ansible.builtin.debug:
    msg: "{{ readiness.checks | selectattr('status', 'equalto', 'fail') | list }}"

- name: Only compare nvidia-smi with the PCI bus (the gather reads the GPU and kernel facts only)
  gpufleet.nodeprep.readiness_info:
    checks: [gpu.count]
  vars:
    nodeprep_readiness_nvidia_timeout: 30
  become: true
  register: count
"""

RETURN = r"""
settings:
  description:
    - The readiness role's settings as typed from its argument spec (every variable of it, the default where unset).
  returned: with O(settings_only=true)
  type: dict
slurm_controller:
  description:
    - The host that runs C(scontrol) for the role - C(nodeprep_readiness_slurm_controller), else the first host of
      the inventory group C(slurm_head), else null.
  returned: with O(settings_only=true)
  type: str
slurm_delegate:
  description:
    - RV(slurm_controller), or this host when none is known (where a Slurm step that then skips is delegated -
      Ansible templates C(delegate_to) before the step's condition).
  returned: with O(settings_only=true)
  type: str
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
    - The same list is in the result under the key C(values) too, the key the P(gpufleet.nodeprep.readiness#role)
      role's host variable C(nodeprep_readiness) and M(gpufleet.nodeprep.readiness_report) read (in Jinja, write
      C(nodeprep_readiness['values']), because C(values) is also the name of a dictionary method).
  returned: success
  type: list
  elements: list
  sample: [[power limit, "700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs"]]
"""
