# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/rules/_memlock.py's Slurm rule: the memlock a job gets, as the fleet's real Slurm
22.05 gave it (srun from the head printing ``ulimit -l; ulimit -Hl``, tests/fixtures/SOURCES.md)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _limits_conf as L
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _memlock

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import read_fixture


def slurmd(name):
    soft, hard = L.parse_proc_limits(read_fixture('host', name))['memlock']
    return {'soft': L.kernel_to_conf_units('memlock', soft), 'hard': L.kernel_to_conf_units('memlock', hard)}


@pytest.mark.parametrize('proc, propagated, submit, job', [
    # What srun printed on the fleet: the head's shell at 8192 (its default), slurmd at 8 MiB: 8192/8192.
    ('slurmd-limits.slurm22.05-el9', True, 8192, (8192, 8192)),
    # The head's shell lowered to 1024 (ulimit -S -l 1024): the job's soft limit is 1024, its hard one slurmd's.
    ('slurmd-limits.slurm22.05-el9', True, 1024, (1024, 8192)),
    # PropagateResourceLimitsExcept=MEMLOCK, the head's shell at 1024: the job has slurmd's 8192/8192.
    ('slurmd-limits.slurm22.05-el9', False, 1024, (8192, 8192)),
    # slurmd with LimitMEMLOCK=64K: 64/64 whatever the shell (a propagated value above the hard limit is lowered).
    ('slurmd-limits-64k.slurm22.05-el9', False, 'unlimited', (64, 64)),
    ('slurmd-limits-64k.slurm22.05-el9', True, 'unlimited', (64, 64)),
    # Propagated, the shell's limit not known here: only the hard limit is.
    ('slurmd-limits.slurm22.05-ubuntu2404', True, None, (None, 8192)),
])
def test_what_a_job_gets(proc, propagated, submit, job):
    assert _memlock.slurm_job_limit(slurmd(proc), propagated, submit) == job


def test_unlimited_slurmd():
    unl = {'soft': 'unlimited', 'hard': 'unlimited'}
    assert _memlock.slurm_job_limit(unl, False, None) == ('unlimited', 'unlimited')
    assert _memlock.slurm_job_limit(unl, True, 65536) == (65536, 'unlimited')
    assert _memlock.slurm_job_limit(unl, True, 'unlimited') == ('unlimited', 'unlimited')
