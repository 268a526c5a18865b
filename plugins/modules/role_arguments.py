#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done on the controller by the action plugin plugins/action/role_arguments.py;
# this file only documents it.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: role_arguments
short_description: Check the variables of several gpufleet.nodeprep roles against their argument specifications
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Checks the variables of each role in O(roles), as the play sees them for the host, against that role's
    C(meta/argument_specs.yml) (entry point C(main)), with the validator Ansible's own role argument validation
    uses (M(ansible.builtin.validate_argument_spec)).
  - One task for several roles. The first play of C(gpufleet.nodeprep.site) uses it so that every role's
    variables are checked on every node, also on the nodes where that role has nothing to do and is therefore not
    run (a role that runs checks its variables again, as usual).
  - The roles' defaults must be loaded in the play (for example with M(ansible.builtin.include_role) and
    C(public=true)); a variable the play does not know is treated as not given.
  - Fails listing, for each role, the variables that do not match, and refuses a role name the collection does
    not have, naming the roles that it has.
  - Runs on the controller; it never connects to the host.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  roles:
    description:
      - Roles of this collection, by short name (V(shm)) or fully qualified name (V(gpufleet.nodeprep.shm)).
    type: list
    elements: str
    required: true
attributes:
  action:
    support: full
    description: Runs on the controller through an action plugin.
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Load the roles' defaults without running them
  ansible.builtin.include_role:
    name: "gpufleet.nodeprep.{{ item }}"
    tasks_from: gather_vars.yml
    public: true
  loop: [shm, memlock]

- name: Check both roles' variables in one task
  gpufleet.nodeprep.role_arguments:
    roles: [shm, memlock]
"""

RETURN = r"""
roles:
  description: The roles checked, by short name.
  returned: always
  type: list
  elements: str
  sample: [shm, memlock]
argument_errors:
  description: For each role whose variables do not match, the validator's messages.
  returned: failed
  type: dict
  sample: {shm: ["argument 'nodeprep_shm_fstab' is of type str and we were unable to convert to bool"]}
"""
