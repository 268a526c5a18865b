#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: limits_facts
short_description: Report pam_limits entries, effective per-user limits and systemd's memlock limits
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
seealso:
  - module: gpufleet.nodeprep.gpu_node_facts
    description: Gathers these facts together with the GPU, kernel, limits, shm and NIC facts in one round trip, as
      the roles do.
description:
  - Reads C(/etc/security/limits.conf) and C(/etc/security/limits.d/*.conf) in the order pam_limits reads them
    and returns every entry with its file and line.
  - For each user in O(users) computes the soft and hard value pam_limits would set at login, with pam_limits'
    precedence (user or uid range, then C(@group), then C(*); a later line of the same rank wins).
  - On Debian and Ubuntu the distribution's pam_limits patch is modelled too - C(*) and group lines do not apply
    to root, and values no line sets start from C(/proc/1/limits).
  - Reads C(DefaultLimitMEMLOCK) and C(DefaultLimitNOFILE) from C(system.conf) and its drop-ins, and asks systemd
    for the limits of the units in O(services). pam_limits does not reach systemd services.
  - Values are V(unlimited) or integers in limits.conf units (KiB for memlock, minutes for cpu); systemd's bytes
    are converted to KiB and its V(infinity) becomes V(unlimited).
  - Values are read as pam_limits' C(process_limit()) reads them. A negative value other than V(-1) is not refused;
    C(strtoull) wraps it around (V(-2) is 2**64 - 2), so for the KiB and minute items it becomes V(unlimited) and
    for the others a huge number; each such line is also reported in RV(ansible_facts.limits.warnings).
  - A limits or C(system.conf) file that exists but cannot be read (a directory, a dangling symlink, no permission)
    does not fail the task. It is listed in RV(ansible_facts.limits.errors), because the limits a login or a service
    gets are then unknown. File names that are not UTF-8 are returned with C(\\x) escapes.
  - Where slurmd runs (a process named C(slurmd) in this system's PID namespace), also reads its
    C(/proc/<pid>/limits) and the C(Propagate*) lines of C(scontrol show config), what a Slurm job's memlock comes
    from (RV(ansible_facts.limits.slurm)).
  - Reads on the node and resolves on the node. M(gpufleet.nodeprep.gpu_node_facts) reads the same on the node and
    resolves it on the controller with the same function, so both return this namespace.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
  - gpufleet.nodeprep.facts_module.ROOT
options:
  users:
    description:
      - Users to compute effective limits for. Each must exist (or be listed in O(groups)).
      - V(*) is any non-root user that no user, C(@group) or uid-range line names (only the C(*) lines reach it),
        the users jobs run as when they have no lines of their own.
    type: list
    elements: str
    default: []
  services:
    description:
      - systemd units whose C(LimitMEMLOCK)/C(LimitNOFILE) to report, as C(systemctl show) reports them.
      - Without a running systemd each is reported as null with a reason in
        RV(ansible_facts.limits.systemd.service_errors).
    type: list
    elements: str
    default: []
  groups:
    description:
      - Group names per user, used instead of the account database. Mainly for tests and for users that do not exist
        yet. The value for a user is a list of group names, a string (one group name, or several separated by
        commas), or a dict with C(groups) (the same forms), and optionally C(uid) and C(gid) (integers 0 or above).
      - Any other value fails the task with a message naming the user, the value and what is allowed.
    type: dict
  flavour:
    description:
      - Which pam_limits behaviour to model. V(debian) is the Debian/Ubuntu patched module, V(upstream) is Linux-PAM
        as shipped on EL. V(auto) picks V(debian) when C(/etc/debian_version) exists.
    type: str
    choices: [auto, debian, upstream]
    default: auto
  root:
    description:
      - Read C(etc/), C(proc/) below this directory instead of C(/). With another root systemd is not asked.
notes:
  - pam_limits only acts at PAM session start. A running shell or service keeps the limits it started with.
"""

EXAMPLES = r"""
- name: Check memlock for the training user and slurmd
  gpufleet.nodeprep.limits_facts:
    users: [root, train]
    services: [slurmd.service]

- name: Fail when a training user cannot lock unlimited memory
  ansible.builtin.assert:
    that:
      - ansible_facts.limits.effective.train.memlock.soft == 'unlimited'
      - ansible_facts.limits.systemd.default.memlock.hard == 'unlimited'
"""

RETURN = r"""
ansible_facts:
  description: Facts added under C(limits).
  returned: always
  type: dict
  contains:
    limits:
      description: Limits configuration and effective values.
      returned: always
      type: dict
      contains:
        entries:
          description: Every valid line, in the order pam_limits reads them.
          type: list
          elements: dict
          returned: always
          sample: [{file: /etc/security/limits.d/90-nodeprep.conf, line: 1, domain: '*', type: '-', item: memlock,
                    value: unlimited}]
          contains:
            file:
              description: The limits file.
              type: str
            line:
              description: Line number in that file.
              type: int
            domain:
              description: User, C(@group), C(%group), C(*) or a UID/GID range, as written.
              type: str
            type:
              description: V(soft), V(hard) or V(-) (both).
              type: str
            item:
              description: The limit (V(memlock), V(nofile), ...).
              type: str
            raw_value:
              description: The value as written.
              type: str
            value:
              description: The value as pam_limits reads it - V(unlimited) or a number in limits.conf units.
              type: raw
            ignored_fields:
              description: Words after the value, which pam_limits ignores; only present when there are some.
              type: list
              elements: str
        files:
          description: The limits files that exist, in reading order.
          type: list
          elements: str
          returned: always
        warnings:
          description:
            - Lines pam_limits skips, with file, line and why; negative values and how pam_limits reads them; file
              names that are not UTF-8.
          type: list
          elements: str
          returned: always
        errors:
          description:
            - One text for every limits file, C(system.conf) or drop-in that exists but could not be read (its path,
              then C(cannot read) and the reason), and for every C(system.conf) value that cannot be parsed (the
              same as RV(ansible_facts.limits.systemd.errors) for those).
            - Non-empty means the effective limits are unknown; a check must treat that as a failure, not a pass.
          type: list
          elements: str
          returned: always
          sample: ["/etc/systemd/system.conf.d/90-memlock.conf: cannot read: dangling symlink to /srv/90-memlock.conf"]
        flavour:
          description: The pam_limits behaviour modelled (V(debian) or V(upstream)).
          type: str
          returned: always
        effective:
          description:
            - User -> item -> C({soft, hard}). Null halves are not set by any line and, on EL, stay what the login
              service had.
            - 'C([<user>]) (dict): One entry per user the module was asked about.'
            - 'C([<user>][<item>]) (dict): One entry per limit item (V(memlock), V(nofile), ...).'
            - 'C([<user>][<item>].soft) (raw): Soft limit (V(unlimited), a number, or V(null) when nothing sets it).'
            - 'C([<user>][<item>].hard) (raw): Hard limit (V(unlimited), a number, or V(null) when nothing sets it).'
          type: dict
          returned: always
          sample: {root: {memlock: {soft: unlimited, hard: unlimited}}}
        sources:
          description:
            - User -> item -> C({soft, hard}) naming the C(file:line) (or C(/proc/1/limits)) each value came from.
            - 'C([<user>]) (dict): One entry per user.'
            - 'C([<user>][<item>]) (dict): One entry per limit item.'
            - 'C([<user>][<item>].soft) (str): C(file:line) (or C(/proc/1/limits)) the soft value came from; V(null)
              when unset.'
            - 'C([<user>][<item>].hard) (str): C(file:line) (or C(/proc/1/limits)) the hard value came from; V(null)
              when unset.'
          type: dict
          returned: always
        no_limits:
          description:
            - Users hit by a C(<domain> -) line (pam_limits sets nothing for them), with its C(file:line).
            - 'C([<user>]) (str): The C(file:line) of the C(<domain> -) line that applies to this user.'
          type: dict
          returned: always
        systemd:
          description: systemd's limits.
          type: dict
          returned: always
          contains:
            default:
              description:
                - Item -> C({soft, hard}) of C(DefaultLimit*), from the files when set there, otherwise what the manager
                  reports, otherwise null.
                - 'C([<item>]) (dict): One entry per C(DefaultLimit*) item, named as in limits.conf (V(memlock),
                  V(nofile), ...).'
                - 'C([<item>].soft) (raw): Soft limit (V(unlimited), a number, or V(null) when nothing sets it).'
                - 'C([<item>].hard) (raw): Hard limit (V(unlimited), a number, or V(null) when nothing sets it).'
              type: dict
              sample: {memlock: {soft: unlimited, hard: unlimited}, nofile: {soft: 1024, hard: 524288}}
            default_source:
              description:
                - Item -> C(file:line), V(manager) or null.
                - 'C([<item>]) (str): C(file:line), V(manager) or V(null) for this item.'
              type: dict
            configured:
              description:
                - Item -> C({soft, hard}) set in C(system.conf) and drop-ins (takes effect after reexec).
                - 'C([<item>]) (dict): One entry per item set in the files.'
                - 'C([<item>].soft) (raw): Soft limit (V(unlimited), a number, or V(null) when nothing sets it).'
                - 'C([<item>].hard) (raw): Hard limit (V(unlimited), a number, or V(null) when nothing sets it).'
              type: dict
            config_files:
              description: C(system.conf) and drop-ins read, in precedence order.
              type: list
              elements: str
            manager:
              description:
                - What the running manager reports for its defaults, or null.
                - 'C([<item>]) (dict): One entry per item the manager reports.'
                - 'C([<item>].soft) (raw): Soft limit (V(unlimited), a number, or V(null) when nothing sets it).'
                - 'C([<item>].hard) (raw): Hard limit (V(unlimited), a number, or V(null) when nothing sets it).'
              type: dict
            services:
              description:
                - Service -> item -> C({soft, hard}), or null when unknown.
                - 'C([<service>]) (dict): One entry per service asked about; V(null) when unknown (see
                  RV(ansible_facts.limits.systemd.service_errors)).'
                - 'C([<service>][<item>]) (dict): One entry per limit item of the service.'
                - 'C([<service>][<item>].soft) (raw): Soft limit (V(unlimited), a number, or V(null) when nothing sets
                  it).'
                - 'C([<service>][<item>].hard) (raw): Hard limit (V(unlimited), a number, or V(null) when nothing sets
                  it).'
              type: dict
            service_errors:
              description:
                - Service -> why it is null.
                - 'C([<service>]) (str): Why the service''s limits are V(null).'
              type: dict
            reason:
              description: Why systemd was not asked, or null.
              type: str
            errors:
              description: The C(system.conf) files and drop-ins that could not be read or parsed, each naming the path.
              type: list
              elements: str
        slurm:
          description:
            - Null where no slurmd of this system runs (or with O(root) other than C(/)); otherwise what a Slurm job's
              memlock comes from.
            - 'C(slurmd) (list): One C({pid, memlock, error}) per slurmd process: C(memlock) is C({soft, hard}) in KiB
              (V(unlimited) or a number) from C(/proc/<pid>/limits), or null with C(error) saying why.'
            - 'C(config) (dict): The C(Propagate*) settings as C(scontrol show config) prints them, or null.'
            - 'C(memlock_propagated) (bool): Whether Slurm gives a job the submitting shell''s soft memlock
              (C(PropagateResourceLimits), default V(ALL), or C(PropagateResourceLimitsExcept)); null when unknown.'
            - 'C(error) (str): Why C(scontrol show config) could not be read or understood, or null.'
          type: dict
          returned: always
          sample: {slurmd: [{pid: 812, memlock: {soft: unlimited, hard: unlimited}, error: null}],
                   config: {PropagatePrioProcess: '0', PropagateResourceLimits: (null),
                            PropagateResourceLimitsExcept: MEMLOCK}, memlock_propagated: false, error: null}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import run_facts_module
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._limits_tree import read_limits
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import (
    LimitsError,
    check_groups_option,
    resolve,
)


def collect(module):
    """Read on the node and resolve here (gpu_node_facts resolves the same read on the controller)."""
    params = module.params
    groups = check_groups_option(params['groups'])
    read = read_limits(module, users=params['users'], services=params['services'], root=params['root'] or '/',
                       groups=groups)
    return resolve(read, flavour=params['flavour'])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            users=dict(type='list', elements='str', default=[]),
            services=dict(type='list', elements='str', default=[]),
            groups=dict(type='dict'),
            flavour=dict(type='str', choices=['auto', 'debian', 'upstream'], default='auto'),
            root=dict(type='path', default='/'),
        ),
        supports_check_mode=True,
    )
    run_facts_module(module, 'limits', lambda: collect(module), (LimitsError,))


if __name__ == '__main__':
    main()
