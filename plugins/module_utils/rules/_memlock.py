# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The one rule for a limit that is wanted (the memlock role's plan and its readiness check read it).

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import UNLIMITED, _is_less


def covers(observed, wanted):
    """The one rule for a limit that is wanted: ``observed`` (an effective soft or hard value in limits.conf units,
    ``unlimited``, or None when unset) is at least ``wanted``; ``unlimited`` beats every number and only
    ``unlimited`` covers ``unlimited``.  A number given as a string of digits is read as that number."""
    if isinstance(observed, str) and observed.isdigit():
        observed = int(observed)
    if observed is None or isinstance(observed, bool) or not (observed == UNLIMITED or isinstance(observed, int)):
        return False
    return not _is_less(observed, wanted)


def slurm_job_limit(slurmd, propagated, submit):
    """The memlock ``(soft, hard)`` a Slurm job started by this slurmd gets (limits.conf units), from slurmd's own
    ``{'soft', 'hard'}`` (/proc/<pid>/limits), whether Slurm propagates MEMLOCK (parsers/_slurm_config.propagated)
    and the submitting shell's soft limit ``submit`` (None: not known here, then soft is None).

    slurmstepd is forked by slurmd and keeps its limits; only the soft limit is propagated, and one above the hard
    limit is lowered to it (SchedMD/slurm src/slurmd/slurmstepd/ulimits.c, _set_limit); not propagated, the job has
    slurmd's limits (slurm.conf(5), PropagateResourceLimits: "If the user limits are not propagated, the limits from
    the slurmd daemon will be propagated to the user's job").
    """
    soft, hard = slurmd.get('soft'), slurmd.get('hard')
    if not propagated:
        return soft, hard
    if submit is None or hard is None:
        return None, hard
    return (hard if _is_less(hard, submit) else submit), hard
