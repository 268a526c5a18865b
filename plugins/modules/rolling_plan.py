#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/rolling_plan.py; this file only documents
# it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: rolling_plan
short_description: Plan a rolling kernel and driver maintenance run (states, batches, preflight)
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Decides, on the controller, the state of every host of O(hosts) in a run of C(gpufleet.nodeprep.rolling_upgrade),
    from its plans (C(ansible_facts.nodeprep_plans), made by M(gpufleet.nodeprep.node_plan)), its marker file
    C(/var/lib/nodeprep/rolling-state) (C(ansible_facts.nodeprep_contents)) and the backend's state answer
    O(slurm) (M(gpufleet.nodeprep.rolling_slurm) O(gpufleet.nodeprep.rolling_slurm#module:op=state)).
  - A node whose kernel or nvidia_driver plan has reasons or needs a reboot is a candidate; settings-only nodes are
    V(in-place) (never drained); a node someone else holds (drained, down, failed, a reboot pending, any reason that
    is not V(nodeprep:...)) is V(skipped-held) unless O(include_held); a node with our reason is picked up at its
    recorded phase. The rules are C(plugins/module_utils/rules/_rolling.py); docs/rolling-maintenance.md lists them.
  - Without O(slurm) it returns only C(need_slurm), the nodes Slurm must be asked about (empty on a fleet already
    on target, which then asks Slurm nothing).
  - Never changes anything.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  hosts:
    description: The hosts of the run, in play order (their Slurm node names are their inventory names).
    type: list
    elements: str
    required: true
  slurm:
    description: The backend's state answer (C(records), C(config), C(partitions), C(jobs)).
    type: dict
  run_id:
    description: The run id (C(nodeprep_rolling_run_id)), 1 to 64 letters, digits, C(.), C(_) or C(-).
    type: str
    required: true
  batch:
    description: Nodes per batch (C(nodeprep_rolling_batch)), a count or a percentage of the nodes worked on.
    type: raw
    default: 1
  busy:
    description: What happens to a node still busy after the drain timeout (C(nodeprep_rolling_busy)).
    type: str
    default: skip
    choices: [skip, wait, fail]
  include_held:
    description: Work on nodes someone else holds, leaving their state and reason (C(nodeprep_rolling_include_held)).
    type: bool
    default: false
  retry_failed:
    description: Work again on nodes that failed verification in an earlier run, instead of verifying only.
    type: bool
    default: false
  min_available:
    description: Usable nodes each partition must keep during a batch (C(nodeprep_rolling_min_available)).
    type: int
    default: 0
  max_failed:
    description: The run stops when more nodes than this failed verification (C(nodeprep_rolling_max_failed)).
    type: int
    default: 1
  reboot:
    description:
      - Who reboots a node the kernel or driver needs rebooted (C(nodeprep_rolling_reboot)), V(roles)
        (M(ansible.builtin.reboot) in the roles) or V(slurm) (C(scontrol reboot nextstate=DOWN) after the install).
      - A held node (O(include_held)) is always rebooted by the roles; its decision's C(reboot) says which.
    type: str
    default: roles
    choices: [roles, slurm]
  reboot_timeout:
    description: The longest reboot timeout of the kernel and nvidia_driver roles, in seconds; the run is refused
      when Slurm's C(ResumeTimeout) is shorter.
    type: int
    default: 0
seealso:
  - module: gpufleet.nodeprep.rolling_slurm
  - module: gpufleet.nodeprep.node_plan
"""

EXAMPLES = r"""
- name: Plan the run
  gpufleet.nodeprep.rolling_plan:
    hosts: "{{ ansible_play_hosts }}"
    run_id: maint-2026-01
    slurm: "{{ slurm_state }}"
    batch: 25%
  run_once: true
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
need_slurm:
  description: The nodes the backend must be asked about.
  returned: always
  type: list
  elements: str
decisions:
  description: Per node - C(state), C(start) (drain, wait, work, verify or null), C(why), C(changes), C(ours),
    C(held), C(original_reason), C(slurm_state), C(marker), C(reboot) (roles or slurm; null when not worked on).
  returned: always
  type: dict
work:
  description: The nodes taken through the run, in order.
  returned: always
  type: list
  elements: str
batches:
  description: The batches of RV(work).
  returned: always
  type: list
  elements: list
rows:
  description: The plan table (node, state, changes, slurm, jobs, batch, why).
  returned: always
  type: list
  elements: dict
text:
  description: The plan table as text.
  returned: always
  type: str
problems:
  description: Why the run must not start (ResumeTimeout, min available); empty when it may.
  returned: always
  type: list
  elements: str
"""
