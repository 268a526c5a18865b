# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rule module's SETTINGS is the one source of a role's variables: its defaults/main.yml, its
meta/argument_specs.yml and the variables table of its README say the same names, types and defaults."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

KEYS = ('type', 'default', 'elements', 'choices', 'required')
# Collection-wide variables a role's SETTINGS also reads (the inventory sets them once for every role); they are in
# the argument specs of the roles that read them, not in any role's defaults or variables table.
SHARED = ('nodeprep_reboot_ok', 'nodeprep_expected_gpus', 'nodeprep_gpu_node')
# A role variable whose default is a shared one: null in SETTINGS (the plan falls back), that expression in defaults.
INHERITS = re.compile(r'^\{\{ (nodeprep_[a-z0-9_]+) \| default\((.*)\) \}\}$')
# Roles whose tasks still read decisions of vars/main.yml: none (issue 22 moved them into the plans).
VARS_WITH_EXPRESSIONS = ()
ROW = re.compile(r'^\| `(nodeprep_[a-z0-9_]+)` \| ([a-z/ ]+) \| (.*?) \|')


def readme_value(value):
    """A default as the README tables write it: YAML flow style (null, false, 64G, [nosuid, nodev], {})."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    text = text[:-3].strip() if text.endswith('...') else text
    return '"{0}"'.format(text[1:-1]) if len(text) >= 2 and text[0] == text[-1] == "'" else text


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
    settings = _plans.RULES[role].SETTINGS
    assert sorted(defaults) == sorted(name for name in settings if name not in SHARED)
    for name, value in defaults.items():
        inherited = INHERITS.match(value) if isinstance(value, str) else None
        if inherited and settings[name].get('default') is None:
            assert inherited.group(1) in SHARED and inherited.group(1) in settings, name
        else:
            assert value == settings[name].get('default'), name


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
    defaults = yaml.safe_load(role_file(role, 'defaults', 'main.yml')) or {}
    assert sorted(rows) == sorted(name for name in settings if name not in SHARED)
    for name, spec in settings.items():
        if name in SHARED:
            continue
        kind, default = rows[name]
        assert kind.split('/')[0].split(' ')[0] == spec['type'], name
        inherited = INHERITS.match(defaults[name]) if isinstance(defaults.get(name), str) else None
        if inherited and spec.get('default') is None:
            assert default == '`{0}` or `{1}`'.format(inherited.group(1), inherited.group(2)), name
        else:
            # The cell is the default, and may go on with what it stands for (`""`: the URL the role derives).
            want = '`{0}`'.format(readme_value(spec.get('default')))
            assert default == want or default.startswith(want + ': ') or default.startswith(want + ' ('), name


@pytest.mark.parametrize('role', sorted(_plans.RULES))
def test_vars_hold_no_expression(role):
    path = os.path.join(ROOT, 'roles', role, 'vars', 'main.yml')
    text = role_file(role, 'vars', 'main.yml') if os.path.exists(path) else ''
    if role not in VARS_WITH_EXPRESSIONS:
        assert '{{' not in text and '{%' not in text
    assert not os.path.exists(os.path.join(ROOT, 'roles', role, 'tasks', 'gather_vars.yml'))
    assert 'site_reasons' not in text


# ---------------------------------------------------------------------------------------------------------------
# Every option's description is one text: the README says what meta/argument_specs.yml says (Markdown for Ansible's
# markup), for every role, the readiness role included.  `make settings-check` (part of `make test`) checks that the
# generated files are what .ci/settings_gen.py writes; this reads the committed files themselves.

def settings_gen():
    path = os.path.join(ROOT, '.ci', 'settings_gen.py')
    spec = importlib.util.spec_from_file_location('nodeprep_settings_gen', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = settings_gen()
CONTRACT_ROLES = [role for role, _settings in _plans.contracts()]
README_ROW = re.compile(r'^\| `(nodeprep_[a-z0-9_.]+)` \| ([^|]+) \| (.*?) \| (.*?) \| (.*) \|$')
README_SHARED = re.compile(r'^- `(nodeprep_[a-z0-9_]+)` \(([^,]+), default `(.*?)`\): (.*)$')


def readme_descriptions(role):
    found = {}
    for line in role_file(role, 'README.md').splitlines():
        match = README_ROW.match(line) or README_SHARED.match(line)
        if match:
            found[match.group(1)] = match.groups()[-1]
    return found


def spec_descriptions(options, prefix=''):
    out = {}
    for name, option in options.items():
        text = option['description']
        out[prefix + name] = ' '.join(text) if isinstance(text, list) else text
        out.update(spec_descriptions(option.get('options') or {}, prefix + name + '.'))
    return out


def test_every_role_with_variables_has_settings():
    with_specs = sorted(name for name in os.listdir(os.path.join(ROOT, 'roles'))
                        if os.path.exists(os.path.join(ROOT, 'roles', name, 'meta', 'argument_specs.yml')))
    assert sorted(CONTRACT_ROLES) == with_specs


@pytest.mark.parametrize('role', CONTRACT_ROLES)
def test_readme_description_is_the_argument_specs_description(role):
    options = yaml.safe_load(role_file(role, 'meta', 'argument_specs.yml'))['argument_specs']['main']['options']
    wanted = spec_descriptions(options)
    found = readme_descriptions(role)
    assert sorted(found) == sorted(wanted)
    for name, text in wanted.items():
        assert found[name] == GEN.markdown(text).replace('|', '\\|'), name


@pytest.mark.parametrize('role', CONTRACT_ROLES)
def test_argument_specs_options_are_the_settings_with_their_descriptions(role):
    options = yaml.safe_load(role_file(role, 'meta', 'argument_specs.yml'))['argument_specs']['main']['options']
    settings = dict(_plans.contracts())[role]
    assert list(options) == list(settings)
    for name, entry in settings.items():
        assert spec_of(options[name]) == spec_of(entry), name
        assert options[name]['description'] == entry['description'], name


def test_the_generated_files_are_current():
    stale = [os.path.relpath(path, ROOT) for path, text in sorted(GEN.generated(_plans.contracts()).items())
             if text != GEN.read(path)]
    assert stale == [], 'run make settings-gen'
