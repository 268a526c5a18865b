#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/node_plan.py;
# this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: node_plan
short_description: One plan per role for a node, from one gather and the role variables typed once
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - For each role in O(roles), types the role's variables as the play sees them for the host with the role's
    settings specification (the one its C(meta/argument_specs.yml) is checked against) and Ansible's own argument
    validator, so that V(false) given as C(-e nodeprep_shm_fstab=false) is false and a comma-separated string given
    for a list is a list; then decides, on the controller, what the role would change on the node.
  - Gathers what the roles need with M(gpufleet.nodeprep.gpu_node_facts) in the same task (one module execution),
    only what the facts of the play do not hold yet unless O(gather=always).
  - Returns the plans in C(ansible_facts.nodeprep_plans) (one per role; plans of other roles made earlier are kept), with
    the settings problems (each naming the variable, the value and what is allowed), the node conditions the role
    fails on, the facts still missing, why the role must run, the drift the readiness checks report, the files with
    their full content, the module arguments, the reports and whether a reboot is needed. The roles' tasks read
    these plans; C(gpufleet.nodeprep.site) runs a role's play only on the nodes whose plan has something to do or
    to say (C(run)).
  - For the C(imex) role it also reads, from the inventory, the hosts of the node's IMEX domain group
    (C(nodeprep_imex_domain_group)) - their C(nodeprep_imex_address) and C(ansible_host), and their GPUs' fabric
    blocks when this run gathered them - so that every node of the group plans the same node list.
  - Never changes the node. It fails the host on the plans' problems only with O(fail_on_problems=true), the first
    task of every role that plans (the role's prologue), so that a role stops before it changes anything; without it
    (the default, for C(gpufleet.nodeprep.site)'s first play and the readiness role, which plan every role) a bad
    setting is only a problem in the plan.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  roles:
    description:
      - Roles of this collection that plan in Python, by short name (V(shm)) or fully qualified name
        (V(gpufleet.nodeprep.shm)). By default every such role.
    type: list
    elements: str
  gather:
    description:
      - V(auto) gathers only what the facts of the play lack (nothing on a node gathered earlier in the run);
        V(always) reads everything the roles need again; V(never) plans from the facts as they are (what is missing
        is reported in each plan's C(missing)).
      - What is read again replaces what the play had (a subset as a whole, with every user, service and network the
        roles ask for); the rest of what the play gathered stays as it was.
    type: str
    choices: [auto, always, never]
    default: auto
  gather_extra:
    description:
      - More to read in the same gather, with the keys of a gather request (C(subsets), C(units), C(files),
        C(packages), C(contents), C(limits_users), C(limits_services), C(nic_networks), C(shm_path),
        C(imex_config), C(imex_timeout)), for roles that still gather for themselves.
    type: dict
    default: {}
  fail_on_error:
    description:
      - Passed to M(gpufleet.nodeprep.gpu_node_facts). V(false) keeps a reader that fails (nvidia-smi while a driver
        is installed but not loaded, a hung GPU) as C(nodeprep_errors) instead of failing the gather; the
        nvidia_driver and readiness roles set it.
      - About the gather only; what fails the host on the plans is O(fail_on_problems).
    type: bool
    default: true
  fail_on_problems:
    description:
      - V(true) fails the host, after planning, when a plan of O(roles) has settings problems, errors (node
        conditions the role cannot work with) or facts that could not be gathered (C(missing)).
      - 'The message is the plans'' own words, one part per role that fails, joined with C( | ) - C(<role> on <host>:
        invalid settings: <problem>; ...; <error>; ...; facts not gathered: <what>; ...), each problem naming the
        variable, the value given and what is allowed.'
      - The plans are still returned in C(ansible_facts.nodeprep_plans) (what Ansible keeps of a failed task's facts
        depends on its release; the message has what a person needs).
      - A GPU role on a node that is not a GPU node fails only on its settings problems (the GPU rule leaves no
        errors and no missing facts in its plan).
      - The plans' C(reports) are not printed by this task; the roles show them in a debug task next to it.
      - Each role's C(tasks/main.yml) starts with this task (O(roles) its own role, tagged C(always)); the default
        V(false) is for callers that must not fail a node for one role's problem (C(gpufleet.nodeprep.site)'s first
        play, the readiness role, the re-plans a role makes after its work, whose failure it words itself).
    type: bool
    default: false
  nvidia_timeout:
    description: Seconds C(nvidia-smi) may take in the gather (unset, the limit of every command, below).
    type: int
  on_unreachable:
    description:
      - What the task does when the node cannot be reached for the gather. V(unreachable) (the default) - the host
        is unreachable, as for any task; when the connection timed out the message names the SSH connect limit
        (C(ansible_ssh_timeout), the ssh connection's C(timeout), OpenSSH's C(ConnectTimeout)).
      - V(fail) - the task fails instead, with C(nodeprep_unreachable=true) and C(limit) (the SSH connect limit that
        passed, or null), so that a play's C(rescue) can record why the node left. C(gpufleet.nodeprep.site) does
        this for the run summary and then lets the node leave as unreachable (M(gpufleet.nodeprep.run_summary)
        O(gpufleet.nodeprep.run_summary#module:leave)).
      - Every command of the gather has the limit C(nodeprep_command_timeout) (seconds, default 60; typed here, a
        value that is not a whole number of seconds of at least 1 fails the task naming it), passed as
        M(gpufleet.nodeprep.gpu_node_facts) O(gpufleet.nodeprep.gpu_node_facts#module:command_timeout).
    type: str
    choices: [unreachable, fail]
    default: unreachable
  nvidia_topology:
    description: Also read C(nvidia-smi topo -m) in the gather (M(gpufleet.nodeprep.gpu_node_facts) O(nvidia_topology));
      the readiness role sets it for its check C(gpu.topology).
    type: bool
    default: false
  plan:
    description:
      - V(false) only gathers what the roles need (as O(gather) says) and decides nothing; C(make bench) times the
        bare gather with it.
    type: bool
    default: true
  keep:
    description:
      - What the facts keep on a host where no plan of O(roles) has anything to do or to say (every plan's C(run)
        empty, so no role's play runs there).
      - V(all) keeps the facts the gather read and the whole plans.
      - V(summary) keeps, on such a host only, each plan's C(run), C(reasons), C(reboot), C(gpu_node) and C(gpu_skip)
        (what C(gpufleet.nodeprep.site) reads after its first play) and none of the gathered facts; a host whose
        plans have work keeps all. C(gpufleet.nodeprep.site)'s first play uses it, so that a node that is already
        right does not carry its facts through the run.
    type: str
    choices: [all, summary]
    default: all
  record:
    description:
      - V(true) also keeps, in the host fact C(nodeprep_run_record), what the plans of O(roles) say now, as
        M(gpufleet.nodeprep.run_summary) with O(gpufleet.nodeprep.run_summary#module:record) keeps it for the
        end-of-run summary (the same function), without a task of its own. C(gpufleet.nodeprep.site) uses it.
    type: bool
    default: false
  site_groups:
    description:
      - V(true) puts the host in the inventory groups of the plays of C(gpufleet.nodeprep.site) whose roles have
        something to do or to say on it, as C(ansible.builtin.group_by) would, without a task of its own -
        C(nodeprep_kernel_driver_work) (any work of the C(kernel) or C(nvidia_driver) plan; the host then goes through
        every settings role too), C(nodeprep_<role>_work) for each settings role, C(nodeprep_settings_work) (any of
        those) and C(nodeprep_no_gpu) (not a GPU node). A host where no plan has anything to do or to say is put in
        no group.
      - The run's output shows why, one line per play of the host (the host, the play, then the plans' C(run)), also
        without C(-v); a host without work shows none.
      - Needs the plans of every role (O(roles) unset, or earlier plans in C(ansible_facts.nodeprep_plans)).
      - With ansible-core 2.21 and later the groups are added through the action plugin API that
        C(ansible.builtin.group_by) uses; before 2.21 the result names one group, C(nodeprep_site_<plays>), under the
        groups above (the strategy adds the group a result names, as for C(ansible.builtin.group_by)).
    type: bool
    default: false
  run:
    description:
      - What the tasks of a role did so far in this run, by role name, for the plans of its later stages (the
        C(kernel) and C(nvidia_driver) roles plan again with it after an installation, a build, C(modprobe) or a
        reboot). Each role's plan returns what to hand back in C(args.run); a role not named plans as at its start.
      - Keys of C(kernel) - C(stage) (V(start), V(installed), V(dkms), V(rebooted)), C(booting) (the release the
        reboot was for), C(dkms) (the registered results of the DKMS builds).
      - Keys of C(nvidia_driver) - C(stage) (V(start), V(installed), V(rebooted)), C(start_version), C(installing),
        C(modprobe) (the registered result of C(modprobe nvidia), as it is), C(files) (the paths written in this run),
        C(initramfs) (the initramfs was rebuilt in this run).
      - A stage that is not one of these fails the task, naming the value.
    type: dict
    default: {}
attributes:
  action:
    support: full
    description: Runs on the controller through an action plugin; the gather runs on the host.
  check_mode:
    support: full
    description: Changes nothing in either mode; the gather also runs in check mode.
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
"""

EXAMPLES = r"""
- name: Plan /dev/shm and memlock for this node (gathers what is missing)
  gpufleet.nodeprep.node_plan:
    roles: [shm, memlock]

- name: A role's prologue - plan, and stop here on settings the role cannot use or on what the node lacks
  gpufleet.nodeprep.node_plan:
    roles: [shm]
    fail_on_problems: true
  tags: [always]

- name: Show why the shm role would run
  ansible.builtin.debug:
    var: ansible_facts.nodeprep_plans.shm.run

- name: Plan the driver again from a new gather, after the installation of this run
  gpufleet.nodeprep.node_plan:
    roles: [nvidia_driver]
    gather: always
    run:
      nvidia_driver: "{{ ansible_facts.nodeprep_plans.nvidia_driver.args.run | combine({'stage': 'installed'}) }}"
"""

RETURN = r"""
msg:
  description: Why the host failed, in the plans' words (see O(fail_on_problems)).
  returned: when O(fail_on_problems=true) and a plan has problems, errors or missing facts
  type: str
  sample: 'shm on gpu-a01: invalid settings: nodeprep_shm_gpu_memory_ratio=0.0: must be a number greater than 0
    (0.5: half of the GPU memory)'
gathered:
  description: Whether this task ran M(gpufleet.nodeprep.gpu_node_facts).
  returned: always
  type: bool
site_runs:
  description:
    - The plays of C(gpufleet.nodeprep.site) the host goes through and why (the plans' C(run)), by play -
      C(kernel_driver), a settings role, C(settings) (the settings roles that run), C(no_gpu) (why the host is not a
      GPU node). Empty on a host where no plan has anything to do or to say.
  returned: when O(site_groups=true)
  type: dict
  sample: {"memlock": ["/etc/security/limits.d/90-nodeprep-memlock.conf: missing"], "settings": ["memlock"]}
ansible_facts:
  description:
    - The facts the gather read (when it ran) and the plans.
    - The plans are returned here only, not a second time in the task result; read
      C(ansible_facts.nodeprep_plans.<role>), also after registering the task.
  returned: always
  type: dict
  contains:
    nodeprep_plans:
      description:
        - One plan per role. Keys C(problems), C(errors), C(missing), C(reasons), C(drift) (items C(check), C(msg)),
          C(reports), C(files) (items C(path), C(state), C(content), C(mode), C(owner), C(group), C(src), C(change)),
          C(units), C(args), C(reboot) (C(needed), C(why), C(allowed); for the C(kernel) and C(nvidia_driver) roles
          also C(timeout) and C(before), the commands to run just before the reboot), C(run) and C(settings) (the
          typed variables).
        - With O(keep=summary), on a host where no plan has anything to do or to say, only C(run), C(reasons),
          C(reboot), C(gpu_node) and C(gpu_skip) of each plan, and no gathered facts.
      returned: when O(plan) is true
      type: dict
    nodeprep_run_record:
      description:
        - Per role of O(roles) (and what the fact held before for other roles) the changes, the reboot and the GPU
          line its plan says now; what M(gpufleet.nodeprep.run_summary) reads at the end of the run.
      returned: when O(record) is true and O(plan) is true
      type: dict
"""
