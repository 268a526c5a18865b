# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/parsers/_slurm_config.py on real ``scontrol show config`` output (captured on the
Slurm fleet's real slurmctld, tests/fixtures/SOURCES.md) and Slurm's own propagation rule (slurm_rlimits_info.c
parse_rlimits, read_config.c)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _slurm_config as S

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import read_fixture

DEFAULT = read_fixture('host', 'scontrol-show-config.slurm22.05')
EXCEPT = read_fixture('host', 'scontrol-show-config-except-memlock.slurm22.05')


def test_the_whole_real_output():
    config = S.parse_show_config(DEFAULT)
    assert config['PropagateResourceLimits'] == 'ALL'
    assert config['PropagateResourceLimitsExcept'] == '(null)'
    assert config['SLURM_VERSION'] == '22.05.8'
    assert config['SlurmctldHost[0]'] == 'slurm-head(10.240.255.254)'
    # The title line has no '=' and is not a setting.
    assert not [key for key in config if key.startswith('Configuration')]


@pytest.mark.parametrize('text, memlock', [(DEFAULT, True), (EXCEPT, False)])
def test_real_outputs(text, memlock):
    config = S.parse_show_config(text)
    assert S.propagated(config, 'MEMLOCK') is memlock
    # Only MEMLOCK is excepted: the other limits are still propagated.
    assert S.propagated(config, 'NOFILE') is True


def lines(propagate='(null)', excepted='(null)'):
    return ['PropagatePrioProcess    = 0', 'PropagateResourceLimits = ' + propagate,
            'PropagateResourceLimitsExcept = ' + excepted]


@pytest.mark.parametrize('config, memlock', [
    (lines(propagate='ALL'), True),
    (lines(propagate='NONE'), False),
    (lines(propagate='MEMLOCK'), True),
    (lines(propagate='NOFILE,CORE'), False),
    (lines(propagate='RLIMIT_MEMLOCK'), True),
    (lines(propagate='CORE, MEMLOCK'), True),
    (lines(excepted='MEMLOCK'), False),
    (lines(excepted='RLIMIT_MEMLOCK,NOFILE'), False),
    (lines(excepted='NOFILE'), True),
    # Except=ALL propagates nothing, Except=NONE everything (parse_rlimits flips the flag for NONE).
    (lines(excepted='ALL'), False),
    (lines(excepted='NONE'), True),
    # Except wins: Slurm reads PropagateResourceLimits only when Except is not set.
    (lines(propagate='ALL', excepted='MEMLOCK'), False),
    (['PropagateResourceLimits = ALL'], True),
    (['PropagateResourceLimitsExcept = MEMLOCK'], False),
])
def test_the_propagation_rule(config, memlock):
    assert S.propagated(S.parse_show_config(config), 'MEMLOCK') is memlock


@pytest.mark.parametrize('config, message', [
    (lines(propagate='memlock'), "PropagateResourceLimits = memlock: 'memlock' is not a limit Slurm propagates "
                                 "(allowed: ALL, NONE, or a list of CPU, FSIZE, DATA, STACK, CORE, RSS, NPROC, NOFILE, "
                                 "MEMLOCK, AS)"),
    (lines(excepted='MEMLOCK,ALL'), "PropagateResourceLimitsExcept = MEMLOCK,ALL: 'ALL' is not a limit Slurm "
                                    "propagates (allowed: ALL, NONE, or a list of CPU, FSIZE, DATA, STACK, CORE, RSS, "
                                    "NPROC, NOFILE, MEMLOCK, AS)"),
    (['PropagatePrioProcess    = 0'],
     'scontrol show config printed neither PropagateResourceLimits nor PropagateResourceLimitsExcept'),
])
def test_what_slurm_refuses_is_not_guessed(config, message):
    with pytest.raises(ValueError) as exc:
        S.propagated(S.parse_show_config(config), 'MEMLOCK')
    assert str(exc.value) == message
