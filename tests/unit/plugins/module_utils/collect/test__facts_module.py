# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _facts_module as F
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _facts_output


class Exit(Exception):
    pass


class FakeModule(object):
    def __init__(self):
        self.warned, self.exited, self.failed = [], None, None

    def warn(self, text):
        self.warned.append(text)

    def exit_json(self, **kwargs):
        self.exited = kwargs
        raise Exit()

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise Exit()


class ReaderError(Exception):
    pass


class DetailedError(Exception):
    def fail_kwargs(self):
        return {'msg': 'no such NIC', 'rc': 1, 'stderr': 'x'}


def test_exits_with_only_facts_and_warns_warnings_then_errors():
    module = FakeModule()
    facts = {'warnings': ['w1'], 'errors': ['/etc/fstab line 1: junk'], 'size_bytes': None}
    with pytest.raises(Exit):
        F.run_facts_module(module, 'shm', lambda: facts, (ReaderError,))
    assert module.exited == {'changed': False, 'ansible_facts': {'shm': facts}}
    assert module.warned == ['w1', '/etc/fstab line 1: junk']


def test_reader_error_fails_with_prefix_and_details():
    module = FakeModule()

    def collect():
        raise DetailedError()

    with pytest.raises(Exit):
        F.run_facts_module(module, 'nics', collect, (DetailedError,), prefix='nic facts: ')
    assert module.failed == {'msg': 'nic facts: no such NIC', 'rc': 1, 'stderr': 'x'}
    assert module.exited is None


def test_other_errors_are_not_swallowed():
    module = FakeModule()

    def collect():
        raise KeyError('bug')

    with pytest.raises(KeyError):
        F.run_facts_module(module, 'shm', collect, (ReaderError,))


def test_namespace_keyed_by_names_is_not_warned():
    module = FakeModule()
    nics = {'warnings': {'mtu': 1500}, 'eth0': {'mtu': 9000}}  # an interface may be called anything
    with pytest.raises(Exit):
        F.run_facts_module(module, 'nics', lambda: nics, (ReaderError,), warn_keys=())
    assert module.warned == []


def test_facts_warnings_label():
    assert F.facts_warnings({'warnings': ['a'], 'errors': ['b']}, 'limits: ') == ['limits: a', 'limits: b']
    assert F.facts_warnings(None, 'x: ') == []


@pytest.mark.parametrize('raw, shown', [
    (b'90-caf\xe9.conf', '90-caf\\xe9.conf'),
    (b'90-caf\xe9.conf'.decode('utf-8', 'surrogateescape'), '90-caf\\xe9.conf'),
    (u'90-caf\u00e9.conf', u'90-caf\u00e9.conf'),
    ('plain', 'plain'),
])
def test_to_display_is_always_utf8(raw, shown):
    assert _facts_output.to_display(raw) == shown
    _facts_output.to_display(raw).encode('utf-8')  # no lone surrogates left
