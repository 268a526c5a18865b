# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.role_arguments: check the variables of several of this collection's roles
against their meta/argument_specs.yml (entry point main) in one task, the way a role's own argument validation does.
Documentation: plugins/modules/role_arguments.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.common.yaml import yaml_load
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._collection import ROLES_DIR


def available_roles(roles_dir=ROLES_DIR):
    """The roles of the collection that have an argument specification."""
    if not os.path.isdir(roles_dir):
        return []
    return sorted(name for name in os.listdir(roles_dir)
                  if os.path.isfile(os.path.join(roles_dir, name, 'meta', 'argument_specs.yml')))


def role_options(role, roles_dir=ROLES_DIR):
    """The options of ``role``'s main entry point, from its meta/argument_specs.yml."""
    path = os.path.join(roles_dir, role, 'meta', 'argument_specs.yml')
    try:
        with open(path) as handle:
            data = yaml_load(handle)
    except (IOError, OSError) as exc:
        raise AnsibleActionFail('cannot read the argument specification of role {0} ({1}): {2}'.format(
            role, path, to_native(exc)))
    try:
        return data['argument_specs']['main'].get('options') or {}
    except (KeyError, TypeError, AttributeError):
        raise AnsibleActionFail('{0} has no argument_specs.main entry point'.format(path))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('roles',))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(
            roles=dict(type='list', elements='str', required=True),
        ))
        roles = [name.rsplit('.', 1)[-1] for name in args['roles']]
        known = available_roles()
        unknown = [name for name in roles if name not in known]
        if unknown:
            raise AnsibleActionFail('roles: {0} {1} not a role of gpufleet.nodeprep with an argument specification; '
                                    'roles that have one: {2}'.format(', '.join(unknown),
                                                                      'is' if len(unknown) == 1 else 'are',
                                                                      ', '.join(known) or 'none'))
        errors = {}
        for role in roles:
            options = role_options(role)
            # As the role's own validation does (ansible.builtin.validate_argument_spec): the role's variables as
            # the play sees them, templated, checked with the same validator.
            provided = self._templar.template(dict((name, task_vars[name]) for name in options if name in task_vars))
            checked = ArgumentSpecValidator(options).validate(provided, validate_role_argument_spec=True)
            if checked.error_messages:
                errors[role] = list(checked.error_messages)
        result['roles'] = roles
        result['changed'] = False
        if errors:
            host = task_vars.get('inventory_hostname', '?')
            result['failed'] = True
            result['argument_errors'] = errors
            result['msg'] = 'Invalid role variables on {0}: {1}'.format(host, '; '.join(
                'role {0}: {1}'.format(role, ', '.join(messages)) for role, messages in sorted(errors.items())))
        else:
            result['msg'] = 'The variables of {0} match their argument specifications'.format(', '.join(roles))
        return result
