# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.nodeprep_plan import FilterModule, nodeprep_os_facts


def test_registered():
    assert FilterModule().filters() == {'nodeprep_os_facts': nodeprep_os_facts}


GATHERED_OS = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
               'distribution_major_version': '9', 'architecture': 'x86_64'}


def test_os_facts_prefer_ansibles_own():
    facts = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
             'distribution_major_version': '24', 'architecture': 'x86_64', 'kernel': '6.8.0-60-generic',
             'kernel_state': {'os': GATHERED_OS}}
    assert nodeprep_os_facts(facts) == {'os_family': 'Debian', 'distribution': 'Ubuntu',
                                        'distribution_version': '24.04', 'distribution_major_version': '24',
                                        'architecture': 'x86_64'}


def test_os_facts_from_the_gather_without_setup():
    assert nodeprep_os_facts({'kernel_state': {'os': GATHERED_OS}, 'nvidia': {'gpus': [{}] * 8}}) == GATHERED_OS


def test_os_facts_leave_out_what_no_source_has():
    # Neither setup nor the gather read the OS: os_family stays undefined, so the roles run setup.
    assert nodeprep_os_facts({'kernel_state': {'os': None}, 'architecture': 'aarch64'}) == {'architecture': 'aarch64'}
    assert nodeprep_os_facts({}) == {}
    with pytest.raises(AnsibleFilterError) as exc:
        nodeprep_os_facts(['not', 'facts'])
    assert str(exc.value) == 'nodeprep_os_facts: the input must be ansible_facts (a dict), got list'
