# -*- coding: utf-8 -*-
# Copyright (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Slurm fleet's configuration (tests/testbed/testbed.py up --slurm): pure text in, text out.

Slurm 22.05.8 as Debian 12 packages it (slurmctld, slurmd, slurm-client, munge). Every setting below has its reason
in tests/testbed/REALITY.md ("Slurm").
"""

from __future__ import absolute_import, division, print_function

import re

# slurmd -C prints "NodeName=<host> CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
# RealMemory=23988" and then "UpTime=...". These are the hardware fields a NodeName line takes from it.
HARDWARE_FIELDS = ('CPUs', 'Boards', 'SocketsPerBoard', 'CoresPerSocket', 'ThreadsPerCore', 'RealMemory')

RETURN_TO_SERVICE = (0, 1, 2)


def parse_key_values(text):
    """``Key=Value`` pairs of one line of Slurm output (``slurmd -C``, ``scontrol show node -o``).

    A value runs until the next `` Key=``, so values with spaces (``Reason=testbed drain [root@...]``) stay whole.
    """
    out = {}
    matches = list(re.finditer(r'(?:^|\s)([A-Za-z][A-Za-z0-9_:/.]*)=', text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out[m.group(1)] = text[m.end():end].strip()
    return out


def parse_slurmd_c(text):
    """The hardware fields of ``slurmd -C`` output, as ints; raises ValueError when one is missing."""
    for line in text.splitlines():
        if line.startswith('NodeName='):
            kv = parse_key_values(line)
            missing = [f for f in HARDWARE_FIELDS if f not in kv]
            if missing:
                raise ValueError('slurmd -C gave no {0}: {1!r}'.format(', '.join(missing), line))
            return {f: int(kv[f]) for f in HARDWARE_FIELDS}
    raise ValueError('no NodeName= line in slurmd -C output: {0!r}'.format(text[-300:]))


def parse_nodes(text):
    """``scontrol show node -o`` (one node a line) -> {NodeName: {key: value}}."""
    nodes = {}
    for line in text.splitlines():
        kv = parse_key_values(line.strip())
        if 'NodeName' in kv:
            nodes[kv['NodeName']] = kv
    return nodes


def slurm_conf(cluster, head, nodes, return_to_service=1):
    """slurm.conf for the fleet: ``head`` is {'name', 'addr'}; each of ``nodes`` has 'name', 'addr' and 'hardware'
    (parse_slurmd_c). No GRES: Slurm 22.05's slurmd drops every GPU without a File= device (REALITY.md, Slurm), and
    the GPU double makes no /dev/nvidia* files."""
    if return_to_service not in RETURN_TO_SERVICE:
        raise ValueError('ReturnToService must be one of {0}, got {1!r}'.format(RETURN_TO_SERVICE, return_to_service))
    if not nodes:
        raise ValueError('a Slurm fleet needs at least one node with slurmd')
    lines = [
        '# Written by tests/testbed/testbed.py up --slurm, the same file on every node of the fleet.',
        'ClusterName={0}'.format(cluster),
        'SlurmctldHost={0}({1})'.format(head['name'], head['addr']),
        'SlurmUser=slurm',
        'AuthType=auth/munge',
        'CredType=cred/munge',
        'StateSaveLocation=/var/lib/slurm/slurmctld',
        'SlurmdSpoolDir=/var/lib/slurm/slurmd',
        'SlurmctldPidFile=/run/slurmctld.pid',
        'SlurmdPidFile=/run/slurmd.pid',
        'SlurmctldLogFile=/var/log/slurm/slurmctld.log',
        'SlurmdLogFile=/var/log/slurm/slurmd.log',
        # No cgroup-based plugin: the nodes are containers sharing one kernel (REALITY.md, Slurm).
        'ProctrackType=proctrack/linuxproc',
        'TaskPlugin=task/none',
        'JobAcctGatherType=jobacct_gather/none',
        'AccountingStorageType=accounting_storage/none',
        'SelectType=select/cons_tres',
        'SelectTypeParameters=CR_Core',
        'SchedulerType=sched/backfill',
        'MpiDefault=none',
        # Jobs get slurmd's memlock (unlimited), not the submitting shell's: Slurm's FAQ for RDMA jobs (REALITY.md).
        'PropagateResourceLimitsExcept=MEMLOCK',
        'SlurmdParameters=config_overrides',
        'ReturnToService={0}'.format(return_to_service),
        # A real GPU node takes minutes to reboot; the default (60 s) would mark it DOWN during `scontrol reboot`.
        'ResumeTimeout=600',
        'RebootProgram=/usr/sbin/reboot',
    ]
    for n in sorted(nodes, key=lambda n: n['name']):
        hw = n['hardware']
        fields = ' '.join('{0}={1}'.format(f, hw[f]) for f in HARDWARE_FIELDS)
        lines.append('NodeName={0} NodeAddr={1} {2} State=UNKNOWN'.format(n['name'], n['addr'], fields))
    lines.append('PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP')
    return '\n'.join(lines) + '\n'


def cgroup_conf():
    """cgroup.conf: autodetect, as Slurm's default; see REALITY.md for what each cgroup mode needs in a node."""
    return ('# Written by tests/testbed/testbed.py up --slurm.\n'
            'CgroupPlugin=autodetect\n'
            # cgroup/v2 (nodes on a cgroup v2 host): make the slurmstepd scope by hand when systemd cannot.
            'IgnoreSystemdOnFailure=yes\n')
