# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rule module's SETTINGS is the one source of a role's variables: its defaults/main.yml, its
meta/argument_specs.yml and the variables table of its README say the same names, types and defaults."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

KEYS = ('type', 'default', 'elements', 'choices', 'required')
ROW = re.compile(r'^\| `(nodeprep_[a-z0-9_]+)` \| ([a-z/]+) \| (.*?) \|')


def readme_value(value):
    """A default as the README tables write it: YAML flow style (null, false, 64G, [nosuid, nodev], {})."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text[:-3].strip() if text.endswith('...') else text


def role_file(role, *parts):
    with open(os.path.join(ROOT, 'roles', role, *parts)) as handle:
        return handle.read()


def spec_of(entry):
    out = dict((key, entry[key]) for key in KEYS if key in entry and entry[key] is not None)
    if entry.get('type') == 'raw' and entry.get('default') is None:
        out.pop('default', None)
    return out


@pytest.mark.parametrize('role', sorted(_plans.RULES))
def test_defaults_are_the_settings_defaults(role):
    defaults = yaml.safe_load(role_file(role, 'defaults', 'main.yml')) or {}
    assert defaults == dict((name, spec.get('default')) for name, spec in _plans.RULES[role].SETTINGS.items())


@pytest.mark.parametrize('role', sorted(_plans.RULES))
def test_argument_specs_are_the_settings(role):
    options = yaml.safe_load(role_file(role, 'meta', 'argument_specs.yml'))['argument_specs']['main']['options']
    settings = _plans.RULES[role].SETTINGS
    assert sorted(options) == sorted(settings)
    for name in settings:
        assert spec_of(options[name]) == spec_of(settings[name]), name


@pytest.mark.parametrize('role', sorted(_plans.RULES))
def test_readme_table_is_the_settings(role):
    rows = {}
    for line in role_file(role, 'README.md').splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    settings = _plans.RULES[role].SETTINGS
    assert sorted(rows) == sorted(settings)
    for name, spec in settings.items():
        kind, default = rows[name]
        assert kind.split('/')[0] == spec['type'], name
        assert default == '`{0}`'.format(readme_value(spec.get('default'))), name


@pytest.mark.parametrize('role', sorted(_plans.RULES))
def test_vars_hold_no_expression(role):
    text = role_file(role, 'vars', 'main.yml')
    assert '{{' not in text and '{%' not in text
    assert not os.path.exists(os.path.join(ROOT, 'roles', role, 'tasks', 'gather_vars.yml'))
    assert 'site_reasons' not in text
