#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin plugins/action/rolling_slurm.py; this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: rolling_slurm
short_description: The Slurm backend of the rolling maintenance run and of the readiness verdict
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - One operation of C(gpufleet.nodeprep.rolling_upgrade) on Slurm nodes, run on the host the task runs on (use
    C(delegate_to) the Slurm controller and C(run_once)). Every command is an argument list run by
    M(ansible.builtin.command) with C(LC_ALL=C) and C(SLURM_TIME_FORMAT=standard) - C(scontrol show node -o
    [<hostlist>]), C(scontrol show config), C(scontrol show partition -o), C(squeue -h -w <hostlist> -o
    %i|%T|%u|%N), C(scontrol update), C(scontrol reboot).
  - Slurm calls are bounded by the operation, not by the number of nodes; a poll of O(nodes) is one
    C(scontrol show node -o <hostlist>) and one C(squeue -w <hostlist>), whatever the batch size.
  - O(op=state) reads every node's record, the configuration and the partitions, and the jobs of O(nodes) (one
    C(squeue) over their hostlist); it changes nothing and runs in check mode too when the task sets
    C(check_mode=false).
  - O(op=lock) takes the lock of the cluster for run O(run_id) on the host the task runs on
    (C(/var/lib/nodeprep/rolling-<ClusterName>.lock), a symbolic link whose target names the run, the Ansible
    controller and its process); it keeps a lock of the same run id, takes over one whose holder is a run of this
    controller that is gone, and fails naming the holder otherwise. O(op=unlock) removes it when O(run_id) holds
    it. In check mode both only read.
  - O(op=drain) drains O(nodes) with O(reason) (V(nodeprep:<run id>:drain)) in one C(scontrol update); it refuses a
    node that is already drained, down, failed, has a reboot pending or carries any reason, so that nothing is
    drained twice and no one else's state is taken over, and refuses the drain when a partition of the nodes would
    keep fewer than O(min_available) usable nodes (Slurm's state of the moment, where nodes that failed verification
    stay drained and do not count).
  - O(op=set_reason) sets O(reason) (or the node's entry of O(reasons)) on the nodes whose current reason is ours
    (V(nodeprep:...)); other nodes are left alone and returned in C(not_ours).
  - O(op=wait_empty) polls until every node of O(nodes) is empty, or O(timeout) seconds passed; it returns the nodes
    still busy with their job ids. A node whose reason is ours is empty when drained (DRAINED in C(sinfo)) with no
    running or completing job; a node of O(held) (worked on without being ours) when no job runs there, DRAIN or not.
    A node outside O(held) whose reason is no longer ours is returned in C(not_ours).
  - O(op=resume) resumes only the nodes whose current reason is ours and that have no reboot pending
    (C(State=RESUME) would cancel it), then waits up to O(resume_timeout) seconds until they are IDLE, MIXED or
    ALLOCATED again. A node already in service counts as back (Slurm 23.11 and later without accounting storage
    keep an old reason on such a node; it is not a hold).
  - O(op=reboot) asks Slurm to reboot O(nodes) (all of them ours) with
    C(scontrol reboot nextstate=DOWN reason=<reason> <nodes>) (O(reason) is V(nodeprep:<run id>:reboot)); slurmd runs
    C(RebootProgram). A node whose reboot is already requested or issued is not asked again. Slurm clears the DRAIN
    flag of a node rebooted with a nextstate and keeps it DOWN after the reboot, so no job starts there.
  - O(op=wait_reboot) polls until each node of O(nodes) registered again after its reboot (DOWN, reason ending in
    C(reboot complete)), Slurm gave up (C(reboot timed out), after C(ResumeTimeout)), or O(timeout) seconds passed.
  - O(op=health) acts on readiness's verdict (the readiness role with C(nodeprep_readiness_slurm=drain)), from
    O(verdicts), or else from the C(nodeprep_readiness) host variable of each of O(nodes) (the failed checks of its
    C(checks); a node without checks was not judged), it drains a failing node that has no reason (or a left-over
    one of ours) with C(nodeprep:health:<check ids>), rewrites that reason when the failed checks changed, and
    resumes a node drained with it that passes; a node with any other reason (an admin's, another tool's, a rolling
    run's), a pending reboot, DOWN, FAIL, a maintenance reservation or power saving is left as it is. One
    C(scontrol show node -o), then one C(scontrol update) per distinct change.
  - The decisions are the pure functions of C(plugins/module_utils/rules/_rolling.py); a site with another workload
    manager implements the same operations in a tasks file (docs/rolling-maintenance.md, "Backend").
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  op:
    description: The operation.
    type: str
    required: true
    choices: [state, lock, unlock, drain, set_reason, wait_empty, resume, reboot, wait_reboot, health]
  nodes:
    description: Slurm node names.
    type: list
    elements: str
    default: []
  reason:
    description: The reason for O(op=drain) and O(op=set_reason), V(nodeprep:<run id>:<phase>).
    type: str
  reasons:
    description: Per node reasons for O(op=set_reason) (a node not named gets O(reason)).
    type: dict
    default: {}
  timeout:
    description: Seconds O(op=wait_empty) waits at most.
    type: int
    default: 3600
  interval:
    description: Seconds between two polls.
    type: int
    default: 5
  resume_timeout:
    description: Seconds O(op=resume) waits for the nodes to be back in service.
    type: int
    default: 60
  bin_dir:
    description: Directory of C(scontrol) and C(squeue) when they are not on the C(PATH).
    type: str
    default: ''
  min_available:
    description: O(op=drain) - usable nodes each partition of O(nodes) must keep outside them.
    type: int
    default: 0
  held:
    description: O(op=wait_empty) - the nodes of O(nodes) worked on without being ours (include_held).
    type: list
    elements: str
    default: []
  run_id:
    description: O(op=lock) and O(op=unlock) - the run id (1 to 64 of C(A-Za-z0-9._-)).
    type: str
  verdicts:
    description: O(op=health) - per node the ids of its failed checks (an empty list passes; null was not judged).
      Without it, the verdicts are read from the C(nodeprep_readiness) host variable of each node of O(nodes).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details:
      - O(op=state), O(op=wait_empty), O(op=lock) and O(op=unlock) only read; the other operations (O(op=health)
        too) report what they would do and run nothing.
  diff_mode:
    support: none
  action:
    support: full
    description: Runs through an action plugin that executes M(ansible.builtin.command) on the delegated host.
seealso:
  - module: gpufleet.nodeprep.rolling_plan
"""

EXAMPLES = r"""
- name: Drain two nodes for run 20260101
  gpufleet.nodeprep.rolling_slurm:
    op: drain
    nodes: [gpu-01, gpu-02]
    reason: nodeprep:20260101:drain
  delegate_to: slurm-head
  run_once: true

- name: Wait until they are empty, at most 1 hour
  gpufleet.nodeprep.rolling_slurm:
    op: wait_empty
    nodes: [gpu-01, gpu-02]
    timeout: 3600
  delegate_to: slurm-head
  run_once: true
  register: waited
"""

RETURN = r"""
commands:
  description: The Slurm commands run, in order.
  returned: always
  type: list
  elements: str
  sample: ["scontrol show node -o", "scontrol update nodename=gpu-01 state=DRAIN reason=nodeprep:r1:drain"]
records:
  description: O(op=state) - every node's C(scontrol show node -o) record, by node name.
  returned: op=state
  type: dict
config:
  description: O(op=state) - C(ResumeTimeout), C(ReturnToService), C(RebootProgram), C(SLURM_VERSION),
    C(SlurmdTimeout), C(ClusterName), C(AccountingStorageType).
  returned: op=state
  type: dict
partitions:
  description: O(op=state) - C(scontrol show partition -o) records, by partition name.
  returned: op=state
  type: dict
jobs:
  description: O(op=state) - the running or completing job ids of each node of O(nodes).
  returned: op=state
  type: dict
empty:
  description: O(op=wait_empty) - the nodes drained and without jobs.
  returned: op=wait_empty
  type: list
  elements: str
busy:
  description: O(op=wait_empty) - the nodes still busy, with their job ids.
  returned: op=wait_empty
  type: dict
asked:
  description: O(op=reboot) - the nodes C(scontrol reboot) was run for.
  returned: op=reboot
  type: list
  elements: str
steps:
  description: O(op=reboot), O(op=wait_reboot) - each node's reboot step (none, request, wait, complete, timed-out).
  returned: op=reboot or op=wait_reboot
  type: dict
rebooted:
  description: O(op=wait_reboot) - the nodes back after their Slurm reboot.
  returned: op=wait_reboot
  type: list
  elements: str
not_rebooted:
  description: O(op=wait_reboot) - the others, with their step, State and Reason.
  returned: op=wait_reboot
  type: dict
timed_out:
  description: O(op=wait_empty) - whether O(timeout) passed before every node was empty.
  returned: op=wait_empty
  type: bool
resumed:
  description: O(op=resume), O(op=health) - the nodes resumed.
  returned: op=resume or op=health
  type: list
  elements: str
back:
  description: O(op=resume) - the nodes back in service (IDLE, MIXED or ALLOCATED), resumed or already there.
  returned: op=resume
  type: list
  elements: str
not_ours:
  description: O(op=resume) and O(op=set_reason) - the nodes left alone because their reason is not ours;
    O(op=wait_empty) - the nodes (outside O(held)) whose reason is no longer ours.
  returned: op=resume or op=set_reason or op=wait_empty
  type: raw
polls:
  description: O(op=wait_empty) - how many polls were made (each one C(scontrol) and one C(squeue)).
  returned: op=wait_empty
  type: int
lock:
  description: O(op=lock), O(op=unlock) - the path of the cluster's lock on the host the task ran on.
  returned: op=lock or op=unlock
  type: str
holder:
  description: O(op=lock), O(op=unlock) - the lock's holder (run_id, controller, pid, since), or null.
  returned: op=lock or op=unlock
  type: dict
decision:
  description: O(op=lock) - take, ours, stale (a gone run of this controller, taken over) or refuse.
  returned: op=lock
  type: str
actions:
  description: O(op=health) - per node C(action) (drain, update, keep, resume, none, skip, unknown), C(reason), C(why).
  returned: op=health
  type: dict
drained:
  description: O(op=health) - the nodes drained by the verdict.
  returned: op=health
  type: list
  elements: str
updated:
  description: O(op=health) - the nodes whose health reason was rewritten.
  returned: op=health
  type: list
  elements: str
skipped:
  description: O(op=health) - the failing nodes left as they are, with why.
  returned: op=health
  type: dict
unknown:
  description: O(op=health) - the nodes Slurm does not know.
  returned: op=health
  type: list
  elements: str
"""
