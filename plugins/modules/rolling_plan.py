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
    V(in-place) (never drained); a node someone else holds (drained, down, failed, a reboot pending, a reservation,
    power saving, any reason that is not V(nodeprep:...)) is V(skipped-held) unless
    C(nodeprep_rolling_include_held); a node with our reason in force is picked up at its recorded phase. The
    rules are C(plugins/module_utils/rules/_rolling.py); docs/rolling-maintenance.md lists them.
  - Without O(slurm) it returns only C(need_slurm), the nodes Slurm must be asked about (empty on a fleet already
    on target, which then asks Slurm nothing).
  - The run's settings are the play's C(nodeprep_rolling_*) variables, typed here once with Ansible's argument spec
    validator from the spec in C(plugins/module_utils/rules/_rolling.py) (C(SETTINGS)); so C(-e
    nodeprep_rolling_include_held=false) is false and a batch written with a non-ASCII digit is refused. A value
    that cannot be typed fails the task naming the variable, the value and what is allowed, before anything is read
    or changed. They are returned as RV(settings) (short names), which the playbook keeps in the fact
    C(nodeprep_rolling_settings). docs/rolling-maintenance.md lists them.
  - The reboot timeout is the longest of C(nodeprep_kernel_reboot_timeout) and
    C(nodeprep_nvidia_driver_reboot_timeout), typed by those roles' own specs.
  - Refuses a play that runs as one slice of an AWX or AAP sliced job (C(awx_workflow_job_name) equal to
    C(awx_job_template_name), as AWX makes a slice workflow from the job template; C(tower_) too), since slices share no
    state, so batches and limits would be counted per slice.
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
    description:
      - The run id the first call returned (RV(run_id)), so that both calls of a run plan with the same id.
      - Default C(nodeprep_rolling_run_id), else the UTC time C(%Y%m%dT%H%M%S).
    type: str
seealso:
  - module: gpufleet.nodeprep.rolling_slurm
  - module: gpufleet.nodeprep.node_plan
"""

EXAMPLES = r"""
- name: Plan the run (nodeprep_rolling_batch and the other settings come from the play's variables)
  gpufleet.nodeprep.rolling_plan:
    hosts: "{{ ansible_play_hosts }}"
    run_id: maint-2026-01
    slurm: "{{ slurm_state }}"
  run_once: true
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
settings:
  description: The run's settings, typed (the C(nodeprep_rolling_) prefix left out), with C(run_id) and
    C(controller) filled in and C(reboot_timeout) (seconds, the longest of the kernel and driver roles').
  returned: always
  type: dict
run_id:
  description: The run id of this run.
  returned: always
  type: str
batch_size:
  description: Nodes per batch (the play's C(serial)); 0 when nothing is worked on.
  returned: always
  type: int
polls:
  description: Per batch, the Slurm commands of one poll of its nodes (one C(scontrol show node -o) and one
    C(squeue) over the batch's hostlist).
  returned: always
  type: list
  elements: list
need_slurm:
  description: The nodes the backend must be asked about.
  returned: always
  type: list
  elements: str
decisions:
  description: Per node - C(state), C(start) (drain, wait, work, verify or null), C(why), C(changes), C(ours),
    C(held), C(original_reason), C(slurm_state), C(marker), C(reboot) (roles or slurm; null when not worked on),
    C(reboot_needed), C(down).
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
  description: Why the run must not start (RebootProgram and ResumeTimeout for Slurm reboots, SlurmdTimeout for a
    held node the roles reboot, min available); empty when it may.
  returned: always
  type: list
  elements: str
"""
