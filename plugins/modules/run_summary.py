#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/run_summary.py;
# this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: run_summary
short_description: Record what site.yml does on each node, and write its end-of-run summary
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - The end-of-run summary of C(playbooks/site.yml), in three uses, all on the controller (no round trip to a node).
  - With O(record), keeps in the host fact C(nodeprep_run_record) what the plans of those roles say now (from
    C(ansible_facts.nodeprep_plans), made by M(gpufleet.nodeprep.node_plan)) - the changes the role makes, or would
    make in check mode, the reboot it needs, the line of a node that is not a GPU node - because the roles plan again
    after their work.
  - With O(error), keeps in the host fact C(nodeprep_run_errors) the first error of that role on the host, with the
    variable to set when the error is one the collection knows (the devel/headers of a custom kernel in no
    repository - C(nodeprep_kernel_manage_devel); NVIDIA's repository, EPEL or ELRepo out of reach - their URL
    variables).
  - The error also says which limit of the run the failed step hit (C(limits) - the SSH connect limit, the whole
    gather's C(nodeprep_gather_timeout), a command's C(nodeprep_command_timeout)) and whether the node could not be
    reached (C(unreachable)).
  - With O(leave), the host leaves the run with an error recorded before - unreachable when it could not be reached
    (so the play recap counts it so), failed otherwise. C(gpufleet.nodeprep.site)'s first play does this in the
    C(rescue) of its gather.
  - Otherwise, builds the summary of every host of O(hosts) - nodes changed, nodes that need a reboot and why, nodes
    failed with their first error, nodes that are not GPU nodes, nodes that hit a limit (with the commands the
    gather killed at their limit) - writes it as C(run-summary.json) into O(dest) and returns it with the lines to
    print.
  - In a slice of a sliced run (a slice of an AWX sliced job, or C(nodeprep_sliced=true); docs/awx.md) the file goes
    into C(<dest>/slices/<run id>/<slice id>/) and the task sets the stat C(nodeprep_run_id) (AWX hands it to the
    next node of the workflow); the playbook C(gpufleet.nodeprep.merge_slices) writes the run's summary from the
    slices'.
    The run id is C(nodeprep_run_id), else AWX's C(awx_workflow_job_id), else C(awx_job_id), else the time.
  - A host of O(hosts) no longer in the play (C(ansible_play_hosts)) without a recorded error is listed as failed
    (unreachable, or failed before the error could be recorded).
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  record:
    description:
      - Record what the plans of these roles say now (role names of the collection).
    type: list
    elements: str
  error:
    description:
      - Record the first error of a role.
    type: dict
    suboptions:
      role:
        description: The role that failed.
        type: str
        required: true
      task:
        description: The name of the task that failed (C(ansible_failed_task.name)).
        type: str
        default: ''
      result:
        description: The failed task's result (C(ansible_failed_result)).
        type: raw
        default: {}
      timed_out_after:
        description:
          - The seconds after which Ansible's task C(timeout) stopped the task
            (C(ansible_failed_result.timedout.period)); V(0) when it did not.
        type: int
        default: 0
  leave:
    description:
      - Make the host leave the run with this error (the O(error) result's C(error)).
    type: dict
  dest:
    description:
      - Directory on the controller for C(run-summary.json); created when missing.
      - Defaults to C(nodeprep_readiness_report_dir), else C(./readiness-report), where the readiness report is
        written.
    type: path
  hosts:
    description:
      - The hosts of the summary, in order. Defaults to C(ansible_play_hosts_all).
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    details:
      - In check mode the summary says what a run would change, and the file is written.
  diff_mode:
    support: N/A
    details:
      - Nothing on the node changes.
  action:
    support: full
    description: Runs on the controller through an action plugin.
notes:
  - Always returns C(changed=false); it never connects to a node.
  - Ansible ends a playbook when every host of a batch failed; no summary is written then.
seealso:
  - module: gpufleet.nodeprep.node_plan
  - module: gpufleet.nodeprep.readiness_report
"""

EXAMPLES = r"""
- name: Remember what the plans of the kernel and the driver say
  gpufleet.nodeprep.run_summary:
    record: [kernel, nvidia_driver]

- name: Write and print the summary
  gpufleet.nodeprep.run_summary:
  run_once: true
  register: summary

- name: Print it
  ansible.builtin.debug:
    msg: "{{ summary.lines }}"
  run_once: true
"""

RETURN = r"""
ansible_facts:
  description: With O(record) or O(error), the host fact it updates.
  returned: with record or error
  type: dict
  contains:
    nodeprep_run_record:
      description: Role -> C(changes), C(reboot), C(reboot_allowed), C(gpu_skip).
      type: dict
      returned: with record
    nodeprep_run_errors:
      description: Role -> C(role), C(task), C(msg), C(hint), C(limits), C(unreachable) of its first error.
      type: dict
      returned: with error
    nodeprep_run_unpredicted:
      description: In check mode, the roles site.yml does not predict on the host after those errors (C(gpu_settings)
        once the nvidia_driver role failed); empty otherwise.
      type: list
      elements: str
      returned: with error
error:
  description: With O(error), the error kept for that role (the first one).
  returned: with error
  type: dict
summary:
  description: The summary written to C(run-summary.json).
  returned: without record and error
  type: dict
  sample:
    version: 1
    check_mode: false
    hosts: 4
    changed: {el9-b200-01: {nvidia_driver: ["driver: not installed"]}}
    reboot: {el9-b200-01: ["nouveau is loaded"]}
    failed: {}
    no_gpu: {slurm-head: "not a GPU node (no NVIDIA GPU on the PCI bus): ..."}
    limits: {el10-b200-01: [{limit: ssh_connect, variable: ansible_ssh_timeout, seconds: 10,
                             what: the SSH connection}]}
    unchanged: [el8-h100-01]
    counts: {changed: 1, reboot: 1, failed: 0, no_gpu: 1, limits: 1, unchanged: 1}
    run_id: "20261207T101500Z"
lines:
  description: The summary as lines to print.
  returned: without record and error
  type: list
  elements: str
path:
  description: Absolute path of C(run-summary.json).
  returned: without record and error
  type: str
  sample: /home/ops/fleet/readiness-report/run-summary.json
run_id:
  description: The run's id (also in the summary).
  returned: without record and error
  type: str
  sample: "4711"
"""
